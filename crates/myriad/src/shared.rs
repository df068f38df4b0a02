//! The state a transaction runs in, shared by every layer above it: configuration, clock,
//! transaction table, table catalog, history recorder, log, data-directory state and the
//! vacuum threads. `Shared` sits below the protocols (`cc/`) and the transaction code
//! (`txn/`), which take a `&Shared` rather than the `Database` facade; the `Database`
//! (`engine/`) owns it together with what belongs to the layers above it (the protocols'
//! per-engine state, the slots' reusable buffers, the procedure registry). All of it hangs
//! off one value, so several engines can live in one process.

use crate::config::{Config, GcPolicy};
use crate::error::{Error, Result};
use crate::history::HistoryLog;
use crate::log::durable::DurableState;
use crate::log::{CommitTicket, LogManager};
use crate::storage::{Table, TableRef};
use crate::timestamp::Source;
use crate::txn::table::TxnTable;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Most tables one database can hold.
pub const MAX_TABLES: usize = 4096;

static NEXT_DB_ID: AtomicU64 = AtomicU64::new(1);

/// A database's shared state (see the module docs).
pub(crate) struct Shared {
    /// This engine's id in the process (a table handle of another engine is refused).
    pub(crate) id: u64,
    pub(crate) config: Config,
    pub(crate) clock: Source,
    /// Shared with the vacuum threads (`gc/vacuum.rs`), as are `clock` and `tables`.
    pub(crate) txns: Arc<TxnTable>,
    /// Tables by id; an id is never reused (a table replaced by `create_index` keeps its
    /// slot).
    pub(crate) tables: Arc<[OnceLock<TableRef>]>,
    /// Live tables by name.
    pub(crate) names: Mutex<HashMap<String, u32>>,
    pub(crate) history: Option<HistoryLog>,
    /// The log of a durable database, set once recovery is done (`recovery/`).
    pub(crate) log: OnceLock<Arc<LogManager>>,
    /// The data directory's state; `None` for a memory-only database.
    pub(crate) durable: Option<DurableState>,
    /// The background threads of GC `vacuum` and `coop` (`gc/vacuum.rs`), started once
    /// the database is open (after recovery, whose physical replay frees versions without
    /// waiting for an epoch); stopped and joined on drop.
    pub(crate) vacuum: OnceLock<crate::gc::vacuum::Vacuum>,
    /// The periodic tick of `partial-order` timestamps (`timestamp::Ticker`), started with
    /// the GC threads; stopped and joined on drop.
    pub(crate) ticker: OnceLock<crate::timestamp::Ticker>,
    /// Version storage `siro`: the segment pool and published zones every table shares
    /// (`version/siro.rs`).
    pub(crate) siro: Option<Arc<crate::version::siro::SiroStore>>,
    /// Panics of the vacuum threads and the tick, which stopped them
    /// (`Database::background_failures`; `background.rs`).
    pub(crate) failures: crate::background::Failures,
}

impl Shared {
    /// The state of an engine without a log (the recovery path attaches one when it is
    /// done) and without tables.
    pub(crate) fn new(config: Config, durable: Option<DurableState>) -> Shared {
        let txns = Arc::new(TxnTable::new(config.max_concurrent_txns));
        let siro = (config.storage == crate::config::VersionStorage::Siro).then(|| {
            let k = config.siro;
            Arc::new(crate::version::siro::SiroStore::new(
                k.segment_bytes,
                k.llt_multiple,
                k.cold_multiple,
                txns.len(),
            ))
        });
        Shared {
            id: NEXT_DB_ID.fetch_add(1, Ordering::Relaxed),
            // `Config::validate`, which every open runs before this, refuses the timestamp
            // sources not built: the default is never taken.
            clock: config
                .timestamps
                .source(config.po_counters, config.max_concurrent_txns)
                .unwrap_or_default(),
            txns,
            siro,
            tables: (0..MAX_TABLES).map(|_| OnceLock::new()).collect(),
            names: Mutex::new(HashMap::new()),
            history: config.record_history.then(HistoryLog::default),
            log: OnceLock::new(),
            durable,
            config,
            vacuum: OnceLock::new(),
            ticker: OnceLock::new(),
            failures: Default::default(),
        }
    }

    /// Starts the background threads of GC `vacuum`, `dead-zone` and `coop` (no-op for the
    /// others), and the timestamp source's tick if it has one; fails if a thread cannot be
    /// started (those started are stopped when the database is dropped).
    pub(crate) fn start_gc_threads(&self) -> Result<()> {
        if let Some(t) =
            crate::timestamp::Ticker::start(&self.clock, self.config.po_tick, &self.failures)?
        {
            let _ = self.ticker.set(t);
        }
        if !matches!(
            self.config.gc,
            GcPolicy::Vacuum | GcPolicy::Coop | GcPolicy::DeadZone
        ) {
            return Ok(());
        }
        let _ = self.vacuum.set(crate::gc::vacuum::Vacuum::start(
            self.config.gc_threads,
            crate::gc::vacuum::Shared {
                clock: self.clock.clone(),
                txns: self.txns.clone(),
                tables: self.tables.clone(),
                watermark: Default::default(),
                siro: self.siro.clone(),
            },
            self.config.gc == GcPolicy::Coop,
            self.config.gc == GcPolicy::DeadZone,
            &self.failures,
        )?);
        Ok(())
    }

    /// Waits until a transaction beginning now reads at `floor` or later
    /// (`timestamp::Source::floor`). Under `partial-order` with shared counters on a durable
    /// database a member is released only once its log epoch is durable, so every epoch
    /// logged so far is made durable first (a round at once, not at the next interval).
    pub(crate) fn floor(&self, floor: crate::timestamp::Timestamp) -> Result<()> {
        if let (Some(crate::log::LogManager::Epoch(l)), Some(_)) =
            (self.log.get().map(|l| &**l), self.clock.deferring_ref())
        {
            if self.clock.now() < floor {
                l.control.wait_durable(l.current_epoch())?;
            }
        }
        self.clock.floor(floor)
    }

    /// Waits until the commit of `ticket` is durable. Memory-only databases return at once.
    /// Fails with `Error::LogFailed` if the log failed before the commit became durable.
    pub(crate) fn wait_durable(&self, ticket: CommitTicket) -> Result<()> {
        match self.log.get() {
            Some(l) if ticket.epoch > 0 => l.control().wait_durable(ticket.epoch),
            _ => Ok(()),
        }
    }

    /// True once the commit of `ticket` is durable (always, for a memory-only database).
    pub(crate) fn is_durable(&self, ticket: CommitTicket) -> bool {
        self.log
            .get()
            .is_none_or(|l| l.control().durable() >= ticket.epoch)
    }

    /// A borrowed table (no reference-count traffic on the transaction path).
    pub(crate) fn table_by_id(&self, id: u32) -> &TableRef {
        match self.tables.get(id as usize).and_then(|t| t.get()) {
            Some(t) => t,
            None => panic!("table id {id} referenced by a transaction does not exist"),
        }
    }

    /// The live table named `name`.
    pub(crate) fn table(&self, name: &str) -> Result<TableRef> {
        let id = *self
            .names
            .lock()
            .get(name)
            .ok_or_else(|| Error::UnknownTable(name.to_string()))?;
        Ok(self.table_by_id(id).clone())
    }

    /// Every live table (not replaced by `create_index`), in id order.
    pub(crate) fn live_tables(&self) -> Vec<TableRef> {
        let names = self.names.lock();
        let mut ids: Vec<u32> = names.values().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .filter_map(|id| self.tables[id as usize].get().cloned())
            .collect()
    }
}

impl crate::gc::GcHost for Shared {
    #[inline]
    fn gc_policy(&self) -> GcPolicy {
        self.config.gc
    }
    #[inline]
    fn clock(&self) -> &Source {
        &self.clock
    }
    #[inline]
    fn txns(&self) -> &TxnTable {
        &self.txns
    }
    #[inline]
    fn table_by_id(&self, id: u32) -> &Table {
        Shared::table_by_id(self, id)
    }
    #[inline]
    fn vacuum(&self) -> Option<&crate::gc::vacuum::Vacuum> {
        self.vacuum.get()
    }
}
