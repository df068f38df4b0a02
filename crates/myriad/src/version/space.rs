//! Memory spaces (thesis §5.4, Fig. 5.16): shared arenas that version blocks are carved from,
//! each growing in fixed increments, each worker allocating from one of them.
//!
//! The thesis's point is contention: every storage scheme allocates new versions from a
//! centralized structure, and with one space every allocating thread serializes on it; with
//! one space per thread the database is in effect partitioned. `Config::memory_spaces(N)`
//! gives a database N spaces; worker slot `s` allocates from space `s % N`. A space is a
//! mutex over a bump pointer into its current increment (`INCREMENT` bytes, the thesis's
//! 512 KB) and free lists per block size. A freed block goes back to the space it came from
//! (its id is in the version header, `Version::space`), so with fewer spaces than threads,
//! frees contend too. Every acquisition of a space's lock is counted
//! (`SpaceStats::lock_acquisitions`): the figure that makes the contention visible on a
//! machine with fewer cores than the thesis's 40.
//!
//! Spaces are process-wide and never return memory to the operating system: a version freed
//! after its database was dropped (crossbeam's deferred frees may run later) still has a live
//! space to return to, and the next database that uses spaces reuses the blocks. The default
//! (`memory_spaces(0)`) does not use them: versions come from the general allocator through
//! each thread's recycling pool (`pool.rs`). Written by hand rather than with an arena crate
//! because the policy (shared, locked, size-class free lists, an id in each block, fixed
//! increments) is the design being measured.

use std::alloc::{alloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Spaces a database may ask for (`Config::memory_spaces`).
pub const MAX_SPACES: usize = 64;
/// Bytes a space grows by (the thesis's 512 KB increments).
pub(crate) const INCREMENT: usize = 512 << 10;
/// Largest block a space hands out; bigger versions come from the general allocator.
pub(crate) const MAX_BLOCK: usize = INCREMENT;

struct Inner {
    /// Next free byte of the current increment, and its end.
    cur: usize,
    end: usize,
    /// Free blocks by exact size (every version of a table has one size, so few classes).
    classes: Vec<(usize, Vec<usize>)>,
}

/// One memory space, on cache lines of its own (spaces sit side by side in a static array;
/// sharing a line would make two spaces contend as one).
#[repr(C, align(128))]
pub(crate) struct Space {
    /// Acquisitions of `inner`'s lock (allocations and frees), next to the lock word.
    locks: AtomicU64,
    inner: Mutex<Inner>,
    /// Bytes of increments this space has taken from the general allocator.
    reserved: AtomicU64,
}

impl Space {
    const fn new() -> Self {
        Space {
            locks: AtomicU64::new(0),
            inner: Mutex::new(Inner {
                cur: 0,
                end: 0,
                classes: Vec::new(),
            }),
            reserved: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The count is itself a shared read-modify-write, on the line the lock's own takes.
        // A poisoned lock (a panic while holding it) leaves consistent state: every update
        // is one push, pop or bump.
        self.locks.fetch_add(1, Ordering::Relaxed);
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

static SPACES: [Space; MAX_SPACES] = [const { Space::new() }; MAX_SPACES];

/// Totals over every space, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpaceStats {
    /// Bytes the spaces have taken from the general allocator (in `INCREMENT`s).
    pub reserved_bytes: u64,
    /// Acquisitions of a space's lock, by allocations and frees, since the process started.
    pub lock_acquisitions: u64,
}

/// Totals over every space since the process started.
pub fn stats() -> SpaceStats {
    let mut s = SpaceStats::default();
    for sp in &SPACES {
        s.reserved_bytes += sp.reserved.load(Ordering::Relaxed);
        s.lock_acquisitions += sp.locks.load(Ordering::Relaxed);
    }
    s
}

/// A block of `size` bytes (a multiple of 8, at most `MAX_BLOCK`) from space `id`
/// (1-based; 0 is not a space). Null if the general allocator fails to grow the space.
pub(crate) fn take(id: u8, size: usize) -> *mut u8 {
    debug_assert!(id >= 1 && id as usize <= MAX_SPACES);
    debug_assert!(size.is_multiple_of(8) && size <= MAX_BLOCK);
    let sp = &SPACES[id as usize - 1];
    let mut g = sp.lock();
    if let Some((_, free)) = g.classes.iter_mut().find(|(s, _)| *s == size) {
        if let Some(p) = free.pop() {
            return p as *mut u8;
        }
    }
    if g.end - g.cur < size {
        // The tail of the old increment is left unused (at most one block's worth).
        // SAFETY: non-zero size.
        let p = unsafe { alloc(Layout::from_size_align(INCREMENT, 8).expect("constant layout")) };
        if p.is_null() {
            return p;
        }
        sp.reserved.fetch_add(INCREMENT as u64, Ordering::Relaxed);
        g.cur = p as usize;
        g.end = g.cur + INCREMENT;
    }
    let p = g.cur;
    g.cur += size;
    p as *mut u8
}

/// Returns a block from `take(id, size)` to its space.
///
/// # Safety
/// `p` came from `take(id, size)` and nothing references it any more.
pub(crate) unsafe fn give(id: u8, p: *mut u8, size: usize) {
    let sp = &SPACES[id as usize - 1];
    let mut g = sp.lock();
    match g.classes.iter_mut().find(|(s, _)| *s == size) {
        Some((_, free)) => free.push(p as usize),
        None => g.classes.push((size, vec![p as usize])),
    }
}

/// The space worker slot `slot` allocates from when the database has `spaces` of them
/// (0: none, the general allocator).
#[inline]
pub(crate) fn for_slot(spaces: usize, slot: usize) -> u8 {
    if spaces == 0 {
        0
    } else {
        (slot % spaces + 1) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Space ids 60.. are used only by these tests, so other tests' allocations do not
    // interfere with what they observe.

    #[test]
    fn a_freed_block_is_reused_by_its_own_space_and_size_only() {
        let a = take(60, 96);
        unsafe { give(60, a, 96) };
        let other_size = take(60, 128);
        assert_ne!(a, other_size);
        let other_space = take(61, 96);
        assert_ne!(a, other_space);
        assert_eq!(
            take(60, 96),
            a,
            "the freed block of the same size comes back"
        );
    }

    #[test]
    fn a_space_grows_in_increments_and_counts_its_locks() {
        let before = SPACES[62].reserved.load(Ordering::Relaxed);
        let locks = SPACES[62].locks.load(Ordering::Relaxed);
        let blocks: Vec<_> = (0..INCREMENT / 4096 + 1).map(|_| take(63, 4096)).collect();
        assert_eq!(
            SPACES[62].reserved.load(Ordering::Relaxed) - before,
            2 * INCREMENT as u64,
            "one increment is full after INCREMENT / 4096 blocks; the next block opens a second"
        );
        assert_eq!(
            SPACES[62].locks.load(Ordering::Relaxed) - locks,
            blocks.len() as u64
        );
        // Blocks do not overlap.
        let mut sorted = blocks.clone();
        sorted.sort_unstable();
        assert!(sorted
            .windows(2)
            .all(|w| w[1] as usize - w[0] as usize >= 4096));
    }

    #[test]
    fn slots_map_round_robin_onto_spaces() {
        assert_eq!(for_slot(0, 5), 0);
        assert_eq!(
            (0..4).map(|s| for_slot(2, s)).collect::<Vec<_>>(),
            [1, 2, 1, 2]
        );
    }
}
