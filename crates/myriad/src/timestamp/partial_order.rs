//! The `partial-order` timestamp source: POMVCC's partial-order timestamps (Partial Order
//! Multi-Version Concurrency Control, 2018, §IV.B, §VI.A, Figs. 15, 18–19), with the paper's
//! shared per-timestamp counters (`PoCounters::Shared`) or the counts kept per
//! transaction-table slot (`PoCounters::Slots`).
//!
//! Definitions.
//! - `CTs`: the open commit timestamp. An update transaction *joins* it at commit and takes
//!   it as its end timestamp: non-conflicting updaters share one (a commit *group*).
//! - `BTs`: the read time every transaction begins at; `BTs < CTs` always.
//! - `PC[t]`, `CC[t]`: transactions that joined group `t` (pre-commit), and those of them
//!   whose commit is complete (Committed, versions post-processed). A transaction that joins
//!   and then aborts takes its `PC` back.
//!
//! Invariants.
//! - `BTs` passes `t` only when `t < CTs` (the group is closed) and `PC[t] = CC[t]` (every
//!   member is complete), one timestamp at a time (D6): a snapshot holds whole groups, never
//!   a Preparing member, so readers never wait for one.
//! - `CTs` moves only in `close` (shared counters: under `advance`, a lock, as it is rare;
//!   slot counts: one compare-and-swap, as nothing else moves it): on a conflict abort
//!   with the conflicting group's timestamp (D5, trigger 1), on a begin with a floor (trigger
//!   2), and by the periodic tick (trigger 3, `Ticker`). A join that loaded `c` re-reads `CTs`
//!   after raising `PC[c]`; `close` stores `CTs` before any advancer reads `PC[c]` (all
//!   SeqCst), so either the joiner sees the new `CTs` and leaves, or the advancer sees its
//!   join.
//! - Counters live in a ring of `RING` entries, entry `t % RING`, and are cumulative (never
//!   reset, so a late joiner's transient raise and undo cannot corrupt a newer group). `CTs`
//!   never opens beyond `BTs + RING − 1`, so the groups sharing an entry with an open one are
//!   all complete.
//!
//! `PoCounters::Slots`. `PC[t] = CC[t]` is kept per transaction-table slot instead: one word
//! per slot, written only by the slot's owner, holding the timestamp its transaction joined
//! and whether that member is still in flight (`ts << 1 | 1`) or done (`ts << 1`, committed
//! or aborted). A join stores its word and re-reads `CTs` (the same store-then-load against
//! `close`'s store-then-scan, all SeqCst); a commit or abort is one store to its own word. So
//! the commit path takes no shared read-modify-write; instead `BTs` is moved by whoever needs
//! it — a begin that finds a closed group not yet readable (`refresh`), the tick, a floor —
//! by scanning the words of the slots ever used: `BTs` becomes `min(CTs, oldest in-flight
//! member's timestamp) − 1`. The tick closes the open group if some word names it. No ring:
//! `CTs` has no bound from `BTs`.
//!
//! Shared read-modify-writes: `Shared`, two per committed update transaction (join and
//! release, on the group's counters), plus one failed-or-not CAS on `BTs` per timestamp it
//! moves; `Slots`, none on the commit path, one `fetch_max` on `BTs` per scan that moves it.
//! A close takes the `advance` lock (`Shared`: two) or one CAS of `CTs` (`Slots`), and the
//! `BTs` moves it makes; a conflict abort's are counted in its transaction's slot, a floor
//! wait's in the slot of its thread's next begin (`FLOOR_RMW`), with its one `BTs` move
//! (`Slots`: it moves `BTs` only once that reaches the floor). A conflict's close is not counted by cause
//! as it happens (`increments` derives it). The tick's are not counted: its thread runs no
//! transaction.
//!
//! On a durable database a member is complete only once its log record is durable (POMVCC
//! §V). `Shared`: `defer_release` lists it with its log epoch in its slot's list and the
//! committer goes on; the log's round that publishes the epoch durable calls
//! `release_durable`, which releases every listed member at or below it (a member listed
//! after that round's scan reads the new durable epoch and releases itself; a failed log
//! releases all). `Slots`: a slot's word holds one member, so the committer waits for its
//! round before `release` (`txn/end.rs`).
//!
//! Visibility lag (`lag`): one commit at a time is sampled, in one group of every
//! `LAG_EVERY` (by timestamp) — a release in such a group finding no sample pending records
//! its timestamp, the time and `CTs − BTs`; the move of `BTs` over it records the time from
//! release to readable. The sample is the group's first commit released while none is
//! pending, so it leans to the early members of a group (which wait longest).

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

thread_local! {
    /// Shared read-modify-writes this thread took in floor waits (`wait_for`: `begin_after`,
    /// `wait_for_floor`) of the source at this address (`PartialOrder::key`), not yet
    /// counted: the thread's next begin counts them in its slot (`take_floor_rmw`), so a
    /// wait between transactions needs no shared counter of its own.
    static FLOOR_RMW: std::cell::Cell<(usize, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Groups the visibility lag is sampled in: those whose timestamp is a multiple of this
/// (and any until the first sample is taken). A sample takes two shared read-modify-writes
/// (taking it, and recording it once readable), which for a sample per group were about as
/// many as the rest of the protocol's per group; the unit tests sample every group.
const LAG_EVERY: u64 = if cfg!(test) { 1 } else { 16 };

/// The first open commit timestamp (`BTs` starts one below it).
const START_CTS: u64 = 2;

/// Ring entries (groups that may be open or incomplete at once; `Shared` only).
const RING: u64 = 4096;

/// Why `CTs` moved (the counts `Source::increments` reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    /// A write-write conflict aborted a transaction at the group's timestamp.
    Conflict,
    /// A begin asked for a floor at or above `CTs`.
    Floor,
    /// The periodic tick.
    Tick,
}

#[derive(Default)]
struct Counts {
    pc: AtomicU64,
    cc: AtomicU64,
}

/// Where the per-timestamp counts are kept.
enum Counters {
    /// The paper's shared `PC`/`CC` pair per timestamp, in a ring.
    Shared(Box<[Counts]>),
    /// One word per transaction-table slot (`ts << 1 | in flight`), and how many slots ever
    /// joined (the scan's bound; raised before a slot's first join).
    Slots {
        words: Box<[CachePadded<AtomicU64>]>,
        used: CachePadded<AtomicUsize>,
    },
}

/// Buckets of the lag histogram (`lag_bucket`): 8 per power of two of nanoseconds.
pub(crate) const LAG_BUCKETS: usize = 8 + 8 * 40;

/// The histogram bucket of `ns` nanoseconds: exact below 8, then 8 per power of two.
fn lag_bucket(ns: u64) -> usize {
    if ns < 8 {
        return ns as usize;
    }
    let e = 63 - u64::from(ns.leading_zeros());
    let m = (ns >> (e - 3)) & 7;
    (8 + (e - 3) * 8 + m).min(LAG_BUCKETS as u64 - 1) as usize
}

/// The smallest value bucket `i` holds (`lag_bucket`'s inverse).
pub(crate) fn lag_bucket_floor(i: usize) -> u64 {
    if i < 8 {
        return i as u64;
    }
    let (e, m) = ((i - 8) / 8 + 3, (i - 8) % 8);
    (8 + m as u64) << (e - 3)
}

/// The sampled visibility lag (see the module docs).
struct Lag {
    /// The sampled commit's timestamp; 0 when none is pending.
    ts: AtomicU64,
    /// When it was released, in nanoseconds since `epoch`.
    at_ns: AtomicU64,
    /// `CTs − BTs` when it was released.
    gap: AtomicU64,
    epoch: Instant,
    /// Release-to-readable times by `lag_bucket`.
    hist: Box<[AtomicU64]>,
    /// Sum of the sampled `CTs − BTs`, and the samples taken.
    gap_sum: AtomicU64,
    samples: AtomicU64,
}

/// What the lag samples hold so far (cumulative; `Source::lag`).
#[derive(Clone, Debug, Default)]
pub(crate) struct LagStats {
    /// Release-to-readable times, counts by `lag_bucket`.
    pub hist: Vec<u64>,
    /// Sum of the sampled `CTs − BTs` (one per sample).
    pub gap_sum: u64,
    pub samples: u64,
}

/// A slot's members waiting for their log epoch to be durable: (epoch, timestamp).
type Listed = Vec<(u64, u64)>;

struct Inner {
    cts: CachePadded<AtomicU64>,
    bts: CachePadded<AtomicU64>,
    counters: Counters,
    /// `Shared`: serialises `close` (CTs moves are rare; the commit path never takes it) and
    /// holds the open group's counters as they were when it opened: the tick closes it only
    /// if they moved (someone joined it). `Slots` closes by a CAS of `CTs` and takes it only
    /// in recovery's `advance_to` (its counters are unused).
    advance: Mutex<(u64, u64)>,
    /// CTs increments by a floor and by the tick (`Cause as usize`; a conflict's are the
    /// rest, `increments`, so a conflict close takes no read-modify-write to count itself).
    increments: [AtomicU64; 3],
    /// How far `advance_to` (recovery) moved `CTs`: not an increment of any cause.
    jumped: AtomicU64,
    /// `Shared` on a durable database: per transaction-table slot, the members that
    /// committed but whose log record is not durable yet, as (epoch, timestamp)
    /// (`defer_release`); empty under `Slots`.
    pending: Box<[CachePadded<Mutex<Listed>>]>,
    lag: Lag,
    /// Tests: the next tick panics.
    #[cfg(test)]
    panic_next_tick: std::sync::atomic::AtomicBool,
}

/// The partial-order source. Cloning shares it.
#[derive(Clone)]
pub(crate) struct PartialOrder {
    inner: Arc<Inner>,
}

impl PartialOrder {
    /// With the paper's shared counters, for `slots` transaction-table slots.
    pub(crate) fn new(slots: usize) -> Self {
        Self::with(
            Counters::Shared((0..RING).map(|_| Counts::default()).collect()),
            slots,
        )
    }

    /// With the counts in `slots` transaction-table slots (`join`'s `slot` is below it).
    pub(crate) fn with_slots(slots: usize) -> Self {
        Self::with(
            Counters::Slots {
                words: (0..slots)
                    .map(|_| CachePadded::new(AtomicU64::new(0)))
                    .collect(),
                used: CachePadded::new(AtomicUsize::new(0)),
            },
            0,
        )
    }

    /// `pending` lists for `pending` slots.
    fn with(counters: Counters, pending: usize) -> Self {
        PartialOrder {
            inner: Arc::new(Inner {
                cts: CachePadded::new(AtomicU64::new(START_CTS)),
                bts: CachePadded::new(AtomicU64::new(1)),
                counters,
                advance: Mutex::new((0, 0)),
                increments: Default::default(),
                jumped: AtomicU64::new(0),
                pending: (0..pending)
                    .map(|_| CachePadded::new(Mutex::new(Vec::new())))
                    .collect(),
                lag: Lag {
                    ts: AtomicU64::new(0),
                    at_ns: AtomicU64::new(0),
                    gap: AtomicU64::new(0),
                    epoch: Instant::now(),
                    hist: (0..LAG_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
                    gap_sum: AtomicU64::new(0),
                    samples: AtomicU64::new(0),
                },
                #[cfg(test)]
                panic_next_tick: Default::default(),
            }),
        }
    }

    /// Whether the counts are kept in the slots.
    pub(crate) fn slots(&self) -> bool {
        matches!(self.inner.counters, Counters::Slots { .. })
    }

    /// The shared counters of `t`; `None` under `Slots`.
    fn counts(&self, t: u64) -> Option<&Counts> {
        match &self.inner.counters {
            Counters::Shared(ring) => Some(&ring[(t % RING) as usize]),
            Counters::Slots { .. } => None,
        }
    }

    /// `Slots`: the word of slot `slot`.
    fn word(&self, slot: usize) -> Option<&AtomicU64> {
        match &self.inner.counters {
            Counters::Shared(_) => None,
            Counters::Slots { words, .. } => words.get(slot).map(|w| &**w),
        }
    }

    /// `BTs`: the read time.
    #[inline]
    pub(crate) fn bts(&self) -> u64 {
        self.inner.bts.load(Ordering::SeqCst)
    }

    /// `CTs`: the open group.
    #[inline]
    pub(crate) fn cts(&self) -> u64 {
        self.inner.cts.load(Ordering::SeqCst)
    }

    /// Joins the open group as the transaction in slot `slot` and returns its timestamp
    /// (`Allocate_CTs`). Returns the shared read-modify-writes it took (`Shared`: one, more
    /// if `CTs` moved under it; `Slots`: none, but one the first time a slot joins).
    #[inline]
    pub(crate) fn join(&self, slot: usize) -> (u64, u64) {
        let mut rmw = 0;
        match &self.inner.counters {
            Counters::Slots { words, used } => {
                let w = &words[slot];
                if slot >= used.load(Ordering::Relaxed) {
                    // Before the word's first store: a scan that must see it reads `used`
                    // after.
                    used.fetch_max(slot + 1, Ordering::SeqCst);
                    rmw += 1;
                }
                loop {
                    let c = self.cts();
                    w.store(c << 1 | 1, Ordering::SeqCst);
                    if self.cts() == c {
                        return (c, rmw);
                    }
                    // Closed under us: a scan may already have missed us; join the next.
                }
            }
            Counters::Shared(ring) => loop {
                let c = self.cts();
                let e = &ring[(c % RING) as usize];
                e.pc.fetch_add(1, Ordering::SeqCst);
                rmw += 1;
                if self.cts() == c {
                    return (c, rmw);
                }
                // Closed under us: its advancer may already have judged it complete.
                e.pc.fetch_sub(1, Ordering::SeqCst);
                rmw += 1;
            },
        }
    }

    /// The member of group `c` in slot `slot` is complete (`Increment_TsCC`); `Shared`:
    /// moves `BTs` if it can. Returns the shared read-modify-writes it took.
    #[inline]
    pub(crate) fn release(&self, c: u64, slot: usize) -> u64 {
        let sampled = self.sample(c);
        if let Some(w) = self.word(slot) {
            w.store(c << 1, Ordering::SeqCst);
            return sampled;
        }
        if let Some(e) = self.counts(c) {
            e.cc.fetch_add(1, Ordering::SeqCst);
        }
        self.try_advance_bts() + 1 + sampled
    }

    /// `Shared` on a durable database: the member of group `c` in slot `slot`, committed
    /// with its log record in epoch `epoch`, is complete once that epoch is durable; the
    /// log's round that makes it so releases it (`release_durable`), so the worker does not
    /// wait. `durable` is the durable epoch read after the member is listed: if it already
    /// covers `epoch`, the round that published it may have scanned before the listing, and
    /// the member releases itself. Returns the shared read-modify-writes it took (the CC
    /// increment, wherever it happens).
    pub(crate) fn defer_release(
        &self,
        c: u64,
        slot: usize,
        epoch: u64,
        durable: impl Fn() -> u64,
    ) -> u64 {
        self.inner.pending[slot].lock().push((epoch, c));
        let d = durable();
        if d >= epoch {
            self.release_listed(slot, d);
        }
        1
    }

    /// Releases every listed member whose epoch is at or below `durable` (`u64::MAX`: the
    /// log failed, release everything).
    pub(crate) fn release_durable(&self, durable: u64) {
        for slot in 0..self.inner.pending.len() {
            self.release_listed(slot, durable);
        }
    }

    fn release_listed(&self, slot: usize, durable: u64) {
        let mut ready = Vec::new();
        {
            let mut l = self.inner.pending[slot].lock();
            if l.is_empty() {
                return;
            }
            l.retain(|&(epoch, c)| {
                if epoch <= durable {
                    ready.push(c);
                }
                epoch > durable
            });
        }
        for c in ready {
            self.release(c, slot);
        }
    }

    /// A member of group `c` in slot `slot` aborted after joining (`Decrement_TsPC` with the
    /// timestamp it joined, not the new `CTs`). `Slots`: its word still names `c` (done), so
    /// the tick may close `c` for it.
    pub(crate) fn abandon(&self, c: u64, slot: usize) {
        if let Some(w) = self.word(slot) {
            w.store(c << 1, Ordering::SeqCst);
            return;
        }
        if let Some(e) = self.counts(c) {
            e.pc.fetch_sub(1, Ordering::SeqCst);
        }
        self.try_advance_bts();
    }

    /// Closes group `c` if it is still the open one (`Update_CTs`): whether this call moved
    /// `CTs`, and the shared read-modify-writes it took. `Slots`: one compare-and-swap of
    /// `CTs` (nothing else moves it while transactions run: every close is this CAS; the
    /// `advance` lock serves only recovery's `advance_to`). `Shared`: under the `advance`
    /// lock (its acquire and release are two), which also guards the open group's counters
    /// as they were at its opening (`tick`); refused (false) while `RING` groups are
    /// incomplete. Neither takes any if `CTs` is already past `c`. Either way a close that
    /// moved `CTs` counts its cause (a floor's or the
    /// tick's, one more) and moves `BTs` over the groups it made complete.
    pub(crate) fn close(&self, c: u64, cause: Cause) -> (bool, u64) {
        if self.cts() != c {
            // Closed already (a conflict with a version of a group `BTs` has not passed yet,
            // or another close won; `CTs` only grows): nothing to take a lock or CAS for.
            return (false, 0);
        }
        if self.slots() {
            let moved = self
                .inner
                .cts
                .compare_exchange(c, c + 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
            let after = if moved { self.closed(cause) } else { 0 };
            return (moved, 1 + after);
        }
        let mut base = self.inner.advance.lock();
        let (moved, rmw) = self.close_locked(&mut base, c, cause);
        (moved, 2 + rmw)
    }

    /// `Shared`'s `close` under the `advance` lock (its read-modify-writes not included).
    fn close_locked(&self, base: &mut (u64, u64), c: u64, cause: Cause) -> (bool, u64) {
        if self.cts() != c {
            return (false, 0);
        }
        if let Some(e) = self.counts(c + 1) {
            if c + 1 >= self.bts() + RING {
                return (false, 0);
            }
            *base = (e.pc.load(Ordering::SeqCst), e.cc.load(Ordering::SeqCst));
        }
        self.inner.cts.store(c + 1, Ordering::SeqCst);
        (true, self.closed(cause))
    }

    /// After a close moved `CTs`: counts it (but a conflict's, `increments`) and moves `BTs`.
    /// Returns the shared read-modify-writes.
    fn closed(&self, cause: Cause) -> u64 {
        let counted = if cause == Cause::Conflict {
            0
        } else {
            self.inner.increments[cause as usize].fetch_add(1, Ordering::Relaxed);
            1
        };
        counted + self.try_advance_bts()
    }

    /// Tests: the next `tick` panics.
    #[cfg(test)]
    pub(crate) fn panic_next_tick(&self) {
        self.inner.panic_next_tick.store(true, Ordering::Release);
    }

    /// This source's key in `FLOOR_RMW`.
    fn key(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// Leaves `rmw` shared read-modify-writes of a floor wait on this thread for its next
    /// begin to count (`FLOOR_RMW`).
    fn note_floor_rmw(&self, rmw: u64) {
        let key = self.key();
        FLOOR_RMW.with(|c| {
            let (k, n) = c.get();
            c.set((key, if k == key { n + rmw } else { rmw }));
        });
    }

    /// The shared read-modify-writes this thread's floor waits took since its last begin
    /// (`FLOOR_RMW`), taken: a begin counts them in its slot.
    pub(crate) fn take_floor_rmw(&self) -> u64 {
        let key = self.key();
        FLOOR_RMW.with(|c| match c.get() {
            (k, n) if k == key && n > 0 => {
                c.set((k, 0));
                n
            }
            _ => 0,
        })
    }

    /// Whether anyone joined the open group `c` since it opened (`Shared`: its counters
    /// moved from `base`; `Slots`: some slot's word names it).
    fn joined_since_open(&self, base: (u64, u64), c: u64) -> bool {
        match &self.inner.counters {
            Counters::Shared(_) => self.counts(c).is_some_and(|e| {
                (e.pc.load(Ordering::SeqCst), e.cc.load(Ordering::SeqCst)) != base
            }),
            Counters::Slots { words, used } => words[..used.load(Ordering::SeqCst)]
                .iter()
                .any(|w| w.load(Ordering::SeqCst) >> 1 == c),
        }
    }

    /// The periodic tick: closes the open group if anyone joined it since it opened, so a
    /// commit becomes readable without a conflict or a floor. Its shared read-modify-writes
    /// are not counted: they are the tick thread's, not a transaction's.
    pub(crate) fn tick(&self) {
        #[cfg(test)]
        if self.inner.panic_next_tick.swap(false, Ordering::AcqRel) {
            panic!("injected by a test");
        }
        if self.slots() {
            let c = self.cts();
            if self.joined_since_open((0, 0), c) {
                self.close(c, Cause::Tick);
            }
        } else {
            let mut base = self.inner.advance.lock();
            let c = self.cts();
            if self.joined_since_open(*base, c) {
                self.close_locked(&mut base, c, Cause::Tick);
            }
        }
        self.try_advance_bts();
    }

    /// `Slots`: a begin is about to read `BTs`; if a closed group is not readable yet, scan
    /// the slots to move it (`Shared` moves it at every release). Returns the shared
    /// read-modify-writes it took.
    #[inline]
    pub(crate) fn refresh(&self) -> u64 {
        if self.slots() && self.bts() + 1 < self.cts() {
            self.try_advance_bts()
        } else {
            0
        }
    }

    /// Moves `BTs` over every complete closed group (`Update_BTs`, D6). Returns the shared
    /// read-modify-writes it took.
    pub(crate) fn try_advance_bts(&self) -> u64 {
        match &self.inner.counters {
            Counters::Shared(_) => self.advance_shared(),
            Counters::Slots { .. } => self.move_bts(self.slots_target()),
        }
    }

    /// `Slots`: how far `BTs` may move now: below the oldest group a member is still in
    /// flight in, and below `CTs`.
    fn slots_target(&self) -> u64 {
        let Counters::Slots { words, used } = &self.inner.counters else {
            return self.bts();
        };
        // CTs first, then the words: a member that joined a group below the CTs we read
        // published its word before it re-read CTs (module docs).
        let ct = self.cts();
        let n = used.load(Ordering::SeqCst);
        let lo = words[..n]
            .iter()
            .map(|w| w.load(Ordering::SeqCst))
            .filter(|v| v & 1 == 1)
            .map(|v| v >> 1)
            .fold(ct, u64::min);
        lo.saturating_sub(1)
    }

    /// `Slots`: moves `BTs` to `target` (a `slots_target`) if that is ahead of it. Returns the
    /// shared read-modify-writes it took.
    fn move_bts(&self, target: u64) -> u64 {
        if target <= self.bts() {
            return 0;
        }
        self.inner.bts.fetch_max(target, Ordering::SeqCst);
        self.lag_check(target) + 1
    }

    /// `Shared`: `BTs` moves one timestamp at a time over complete closed groups.
    fn advance_shared(&self) -> u64 {
        let mut rmw = 0;
        loop {
            let b = self.bts();
            let next = b + 1;
            if next >= self.cts() {
                return rmw;
            }
            let Some(e) = self.counts(next) else {
                return rmw;
            };
            // PC first: every real member's raise precedes the CTs store we just saw.
            let pc = e.pc.load(Ordering::SeqCst);
            let cc = e.cc.load(Ordering::SeqCst);
            if pc != cc {
                return rmw;
            }
            rmw += 1;
            if self
                .inner
                .bts
                .compare_exchange(b, next, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                rmw += self.lag_check(next);
            }
        }
    }

    /// A release of group `c`: becomes the lag sample if none is pending. Returns the
    /// shared read-modify-writes it took.
    #[inline]
    fn sample(&self, c: u64) -> u64 {
        let lag = &self.inner.lag;
        if lag.ts.load(Ordering::Relaxed) != 0
            || (!c.is_multiple_of(LAG_EVERY) && lag.samples.load(Ordering::Relaxed) != 0)
        {
            return 0;
        }
        lag.at_ns
            .store(lag.epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
        lag.gap
            .store(self.cts().saturating_sub(self.bts()), Ordering::Relaxed);
        // Release: a checker that takes the sample reads the time and gap stored above
        // (another release's, if two raced: they are as old).
        let _ = lag
            .ts
            .compare_exchange(0, c, Ordering::Release, Ordering::Relaxed);
        1
    }

    /// `BTs` reached `b`: records the pending sample's lag if it is readable now. Returns
    /// the shared read-modify-writes it took.
    fn lag_check(&self, b: u64) -> u64 {
        let lag = &self.inner.lag;
        let t = lag.ts.load(Ordering::Acquire);
        if t == 0 || t > b {
            return 0;
        }
        let (at, gap) = (
            lag.at_ns.load(Ordering::Relaxed),
            lag.gap.load(Ordering::Relaxed),
        );
        if lag
            .ts
            .compare_exchange(t, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            let ns = (lag.epoch.elapsed().as_nanos() as u64).saturating_sub(at);
            lag.hist[lag_bucket(ns)].fetch_add(1, Ordering::Relaxed);
            lag.gap_sum.fetch_add(gap, Ordering::Relaxed);
            lag.samples.fetch_add(1, Ordering::Relaxed);
        }
        1
    }

    /// The lag samples so far.
    pub(crate) fn lag(&self) -> LagStats {
        let lag = &self.inner.lag;
        LagStats {
            hist: lag.hist.iter().map(|h| h.load(Ordering::Relaxed)).collect(),
            gap_sum: lag.gap_sum.load(Ordering::Relaxed),
            samples: lag.samples.load(Ordering::Relaxed),
        }
    }

    /// Makes `BTs ≥ floor` (`Allocate_BTs(Ts)`): closes the group at `floor` if it is still
    /// open, then waits until every group up to it is complete. The caller checked
    /// `floor < CTs` or `floor == CTs`.
    pub(crate) fn wait_for(&self, floor: u64) {
        let backoff = crossbeam_utils::Backoff::new();
        while self.bts() < floor {
            let c = self.cts();
            if c <= floor {
                let (_, rmw) = self.close(c, Cause::Floor);
                self.note_floor_rmw(rmw);
            }
            // `Slots`: `BTs` moves only once it reaches the floor, so a wait on a member
            // still in flight takes one read-modify-write, not one per group completed
            // meanwhile (the next begin's `refresh` moves it for the others).
            let rmw = if self.slots() {
                let target = self.slots_target();
                if target >= floor {
                    self.move_bts(target)
                } else {
                    0
                }
            } else {
                self.try_advance_bts()
            };
            self.note_floor_rmw(rmw);
            if self.bts() < floor {
                backoff.snooze();
            }
        }
    }

    /// Recovery: continue after `ts` (no transaction runs).
    pub(crate) fn advance_to(&self, ts: u64) {
        let mut base = self.inner.advance.lock();
        if self.bts() < ts {
            self.inner.bts.store(ts, Ordering::SeqCst);
        }
        if self.cts() <= ts {
            if let Some(e) = self.counts(ts + 1) {
                *base = (e.pc.load(Ordering::SeqCst), e.cc.load(Ordering::SeqCst));
            }
            let from = self.cts();
            self.inner.cts.store(ts + 1, Ordering::SeqCst);
            self.inner
                .jumped
                .fetch_add(ts + 1 - from, Ordering::Relaxed);
        }
    }

    /// CTs increments so far, by cause. A conflict's are not counted as they happen (that
    /// would be one more shared read-modify-write per close): they are every move of `CTs`
    /// from its start that neither a floor, the tick nor recovery made (a snapshot of the
    /// counters while closes run may be off by those in progress).
    pub(crate) fn increments(&self, cause: Cause) -> u64 {
        let of = |c: Cause| self.inner.increments[c as usize].load(Ordering::Relaxed);
        match cause {
            Cause::Conflict => {
                let jumped = self.inner.jumped.load(Ordering::Relaxed);
                let moved = self.cts().saturating_sub(START_CTS + jumped);
                moved.saturating_sub(of(Cause::Floor) + of(Cause::Tick))
            }
            c => of(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both kinds of counts: shared, and in 3 slots.
    fn both() -> [PartialOrder; 2] {
        [PartialOrder::new(3), PartialOrder::with_slots(3)]
    }

    /// Members of one group share its timestamp; it becomes readable only once it is closed
    /// and every member is complete; an aborted member does not hold it back. (`Slots`
    /// moves `BTs` when a begin refreshes it, not at the release.)
    #[test]
    fn groups_become_readable_when_closed_and_complete() {
        for p in both() {
            let refresh = || {
                p.refresh();
            };
            let (a, _) = p.join(0);
            let (b, _) = p.join(1);
            let (c, _) = p.join(2);
            assert_eq!((a, b), (2, 2));
            assert_eq!(c, 2);
            p.release(a, 0);
            refresh();
            assert_eq!(p.bts(), 1, "the group is still open");
            // Shared: the lock's two; slot counts: one CAS. No count of a conflict's close,
            // and BTs does not move yet.
            let rmw = if p.slots() { 1 } else { 2 };
            assert_eq!(
                p.close(2, Cause::Conflict),
                (true, rmw),
                "closed, with its RMWs"
            );
            assert_eq!(
                p.close(2, Cause::Conflict),
                (false, 0),
                "closed once; a close of a closed group takes no RMW"
            );
            assert_eq!(p.cts(), 3);
            refresh();
            assert_eq!(p.bts(), 1, "two members are in flight");
            p.abandon(c, 2);
            refresh();
            assert_eq!(p.bts(), 1);
            p.release(b, 1);
            refresh();
            assert_eq!(p.bts(), 2, "closed and complete");
            let (d, _) = p.join(0);
            assert_eq!(d, 3);
            p.tick();
            assert_eq!(p.cts(), 4, "a tick closes a group someone joined");
            assert_eq!(p.bts(), 2);
            p.release(d, 0);
            refresh();
            assert_eq!(p.bts(), 3);
            p.tick();
            assert_eq!(p.cts(), 4, "a tick leaves an empty group open");
            p.wait_for(4);
            assert_eq!((p.bts(), p.cts()), (4, 5), "a floor closes the open group");
            assert_eq!(p.increments(Cause::Conflict), 1);
            assert_eq!(p.increments(Cause::Tick), 1);
            assert_eq!(p.increments(Cause::Floor), 1);
            // Released at 2 (a), readable when BTs passed 2; then d's, at 3.
            let lag = p.lag();
            assert_eq!(lag.samples, 2, "slots {}", p.slots());
            assert_eq!(lag.hist.iter().sum::<u64>(), 2);
            assert!(lag.gap_sum >= 2, "each sample saw CTs − BTs ≥ 1");
        }
    }

    /// Under `Slots` a commit takes no shared read-modify-write (the first join of a slot
    /// raises the scan bound once; a release that becomes the lag sample claims it).
    #[test]
    fn slot_counts_take_no_shared_rmw_per_commit() {
        let p = PartialOrder::with_slots(2);
        let mut rmw = 0;
        for _ in 0..1000 {
            let (c, r) = p.join(1);
            rmw += r + p.release(c, 1);
        }
        assert_eq!(p.bts(), 1, "no close, no readable group");
        assert!(rmw <= 2, "{rmw} shared RMW over 1000 commits");
        let (c, _) = p.join(1);
        assert_eq!(c, 2, "every commit shared the open timestamp");
    }

    /// Threads joining, releasing and closing at once: BTs never passes a group with a
    /// member still in flight.
    #[test]
    fn bts_never_passes_an_incomplete_group() {
        for p in both() {
            let p = &p;
            let stop = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|s| {
                for slot in 0..2 {
                    s.spawn(move || {
                        for i in 0..20_000u64 {
                            p.refresh();
                            let (c, _) = p.join(slot);
                            assert!(
                                p.bts() < c,
                                "BTs {} reached an open member's group {c}",
                                p.bts()
                            );
                            if i % 7 == 0 {
                                p.abandon(c, slot);
                            } else {
                                p.release(c, slot);
                            }
                        }
                    });
                }
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        p.tick();
                        std::thread::yield_now();
                    }
                });
                // Joined threads end the scope only after stop is set below; the tick
                // thread loops until then.
                s.spawn(|| {
                    std::thread::sleep(std::time::Duration::from_millis(300));
                    stop.store(true, Ordering::Relaxed);
                });
            });
            p.tick();
            p.try_advance_bts();
            assert_eq!(p.bts() + 1, p.cts(), "every group completed");
        }
    }

    /// The lag histogram's buckets cover every value, in order, within 1/8 of it.
    #[test]
    fn lag_buckets_are_ordered_and_tight() {
        let mut last = 0;
        for ns in (0..100_000u64).chain([1 << 30, (1 << 40) - 1]) {
            let b = lag_bucket(ns);
            assert!(b >= last && b < LAG_BUCKETS, "{ns} → {b}");
            last = b;
            let lo = lag_bucket_floor(b);
            assert!(lo <= ns && ns - lo <= ns / 8, "{ns} in bucket from {lo}");
        }
    }
}
