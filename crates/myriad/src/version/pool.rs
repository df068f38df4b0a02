//! Per-thread recycling of version blocks.
//!
//! Every version of a table has the same size (rows are fixed width), and in steady state a
//! worker frees about as many versions (through GC) as it allocates (through updates). Handing
//! a freed block to the next allocation of the same size on the same thread skips the general
//! allocator's cross-thread free path and the purging and re-zeroing of pages it returns to the
//! OS: on YCSB with 1 KB rows, allocator alloc/free/collect and kernel page clearing were
//! ≈ 28 % of a worker's time before this pool (docs/benchmarks.md). It is a few lines over the
//! global allocator rather than a crate because the policy (exact-size classes, a byte cap,
//! no cross-thread hand-off) is what the version store needs and nothing more; per-thread
//! memory spaces that grow in fixed increments (thesis §5.4, Fig. 5.16) will replace it.
//!
//! The free blocks of a class are kept as a stack of pointers rather than as a list threaded
//! through the blocks: a block freed by GC has usually left the cache, and a list would write
//! its first word on free and read it on reuse (two misses per version, ≈ 4 % of a YCSB
//! worker's time with 1 KB rows before this change); the stack touches only itself.
//!
//! Invariants: a pooled block came from `std::alloc::alloc` with `Layout(size, 8)` for its
//! class's `size`; it is owned by the pool alone (no version points at it). A thread pools at
//! most `MAX_POOLED_BYTES` and `MAX_POOLED_BLOCKS`; the rest goes back to the allocator, as
//! does everything pooled when the thread exits.

use std::alloc::{alloc, dealloc, Layout};
use std::cell::RefCell;

/// Distinct block sizes pooled per thread (one per table row size in use).
const CLASSES: usize = 8;
/// Bytes of free blocks a thread keeps for reuse.
const MAX_POOLED_BYTES: usize = 64 << 20;
/// Free blocks a thread keeps for reuse (bounds the stacks when versions are small).
const MAX_POOLED_BLOCKS: usize = 1 << 16;

struct Class {
    size: usize,
    free: Vec<*mut u8>,
}

struct Pool {
    classes: [Class; CLASSES],
    bytes: usize,
    blocks: usize,
}

impl Pool {
    const fn new() -> Self {
        const EMPTY: Class = Class {
            size: 0,
            free: Vec::new(),
        };
        Pool {
            classes: [EMPTY; CLASSES],
            bytes: 0,
            blocks: 0,
        }
    }

    fn pop(&mut self, size: usize) -> Option<*mut u8> {
        let c = self.classes.iter_mut().find(|c| c.size == size)?;
        let p = c.free.pop()?;
        self.bytes -= size;
        self.blocks -= 1;
        Some(p)
    }

    /// Takes `p` (a block of `size` bytes) into the pool; false if it is full.
    fn push(&mut self, p: *mut u8, size: usize) -> bool {
        if self.bytes + size > MAX_POOLED_BYTES || self.blocks >= MAX_POOLED_BLOCKS {
            return false;
        }
        let c = match self.classes.iter().position(|c| c.size == size) {
            Some(i) => &mut self.classes[i],
            None => match self.classes.iter_mut().find(|c| c.free.is_empty()) {
                Some(c) => {
                    c.size = size;
                    c
                }
                None => return false,
            },
        };
        c.free.push(p);
        self.bytes += size;
        self.blocks += 1;
        true
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for c in &mut self.classes {
            for p in c.free.drain(..) {
                // SAFETY: each pooled block was allocated with Layout(size, 8) (see `pop`).
                unsafe { dealloc(p, Layout::from_size_align_unchecked(c.size, 8)) };
            }
        }
    }
}

thread_local! {
    static POOL: RefCell<Pool> = const { RefCell::new(Pool::new()) };
}

/// A block for `layout` (size ≥ 8, align 8): a pooled one if this thread has one, else fresh.
/// Null if the allocator fails.
pub(crate) fn take(layout: Layout) -> *mut u8 {
    debug_assert!(layout.size() >= 8 && layout.align() == 8);
    let pooled = POOL
        .try_with(|p| {
            p.try_borrow_mut()
                .ok()
                .and_then(|mut p| p.pop(layout.size()))
        })
        .ok()
        .flatten();
    // SAFETY: layout has non-zero size.
    pooled.unwrap_or_else(|| unsafe { alloc(layout) })
}

/// The block the next `take` of `size` bytes on this thread returns, if it comes from the
/// pool (for prefetching it: a pooled block has usually left the cache).
pub(crate) fn peek(size: usize) -> Option<*const u8> {
    POOL.try_with(|p| {
        let p = p.try_borrow().ok()?;
        let c = p.classes.iter().find(|c| c.size == size)?;
        c.free.last().map(|&b| b as *const u8)
    })
    .ok()
    .flatten()
}

/// Returns a block obtained from `take` with the same `layout`.
///
/// # Safety
/// `p` came from `take(layout)` and nothing references it any more.
pub(crate) unsafe fn give(p: *mut u8, layout: Layout) {
    let kept = POOL
        .try_with(|pool| {
            pool.try_borrow_mut()
                .map(|mut pool| pool.push(p, layout.size()))
                .unwrap_or(false)
        })
        .unwrap_or(false);
    if !kept {
        dealloc(p, layout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_a_freed_block_of_the_same_size_only() {
        let l = Layout::from_size_align(96, 8).unwrap();
        let other = Layout::from_size_align(128, 8).unwrap();
        let a = take(l);
        unsafe { give(a, l) };
        let b = take(other);
        assert_ne!(a, b, "a block of another size must not be handed out");
        let c = take(l);
        assert_eq!(a, c, "the freed block of the same size is reused");
        unsafe {
            give(b, other);
            give(c, l);
        }
    }

    #[test]
    fn caps_pooled_bytes() {
        let l = Layout::from_size_align(1 << 20, 8).unwrap();
        let blocks: Vec<_> = (0..(MAX_POOLED_BYTES >> 20) + 4).map(|_| take(l)).collect();
        for &b in &blocks {
            unsafe { give(b, l) };
        }
        let pooled = POOL.with(|p| p.borrow().bytes);
        assert_eq!(pooled, MAX_POOLED_BYTES);
        // Everything pooled is handed out again before any fresh block.
        let again: Vec<_> = (0..MAX_POOLED_BYTES >> 20).map(|_| take(l)).collect();
        assert!(again.iter().all(|p| blocks.contains(p)));
        assert_eq!(POOL.with(|p| p.borrow().bytes), 0);
        for b in again {
            unsafe { give(b, l) };
        }
    }

    #[test]
    fn caps_pooled_blocks_when_blocks_are_small() {
        let l = Layout::from_size_align(16, 8).unwrap();
        let blocks: Vec<_> = (0..MAX_POOLED_BLOCKS + 10).map(|_| take(l)).collect();
        for &b in &blocks {
            unsafe { give(b, l) };
        }
        assert_eq!(POOL.with(|p| p.borrow().blocks), MAX_POOLED_BLOCKS);
        assert_eq!(POOL.with(|p| p.borrow().bytes), MAX_POOLED_BLOCKS * 16);
    }
}
