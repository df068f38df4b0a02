//! Recovery (thesis ch. 4). Nothing to recover yet: without logging (`log/`) a database is
//! memory-only, and no recovery scheme is selectable.
