//! Dead zones (vDriver Theorem 3.5): the sorted read points of the live transactions and a
//! clock bound, and the test of whether a version's visibility interval lies inside one
//! zone. Built by GC `dead-zone` (`gc/dead_zone.rs::build`, whose module docs give the
//! definitions and why a stale list is safe); read by its pruner and by `siro`'s relocations
//! (`siro.rs`). Kept in the version layer so the version store can test versions without
//! reaching up to GC.

/// The sorted read points of the live transactions and the clock bound
/// (`gc/dead_zone.rs`).
#[derive(Default, Debug, Clone)]
pub(crate) struct Zones {
    points: Vec<u64>,
    ct: u64,
}

impl Zones {
    /// Refills the list: `f` pushes the read points into the (emptied) buffer and returns
    /// the clock bound; the points are then sorted.
    pub(crate) fn fill(&mut self, f: impl FnOnce(&mut Vec<u64>) -> u64) {
        self.points.clear();
        self.ct = f(&mut self.points);
        self.points.sort_unstable();
    }

    /// Zones from explicit read points and clock bound (tests).
    #[cfg(test)]
    pub(crate) fn from_points(mut points: Vec<u64>, ct: u64) -> Zones {
        points.sort_unstable();
        Zones { points, ct }
    }

    /// The sorted read points.
    pub(crate) fn points(&self) -> &[u64] {
        &self.points
    }

    /// The clock bound: every transaction registering later reads at or above it.
    pub(crate) fn ct(&self) -> u64 {
        self.ct
    }

    /// The visibility watermark these zones imply: no transaction reads below it.
    pub(crate) fn watermark(&self) -> u64 {
        self.points.first().map_or(self.ct, |&p| p.min(self.ct))
    }

    /// Theorem 3.5: is a committed version with Begin `b` and End `e` visible at no read
    /// point, now or later?
    #[inline]
    pub(crate) fn is_dead(&self, b: u64, e: u64) -> bool {
        if e > self.ct || b >= e {
            return false;
        }
        let i = self.points.partition_point(|&s| s < b);
        self.points.get(i).is_none_or(|&s| s >= e)
    }
}
