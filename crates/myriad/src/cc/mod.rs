//! Concurrency control (thesis §5.3; Hekaton §2–3). The seam is `Protocol` in `Config`, matched
//! once per commit; the protocol built so far is MVOCC (`mvocc.rs`). Visibility of versions
//! (Hekaton Tables 1–2) is shared by every multi-version protocol (`visibility.rs`).

pub mod mvocc;
pub mod visibility;
