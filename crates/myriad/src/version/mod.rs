//! Version storage (thesis §5.4). The seam is `VersionStorage` in `Config`, held by each
//! `Table` as a `Store`; built are append-only chains in either order (`append_n2o`:
//! newest-to-oldest and oldest-to-newest), in-place storage (`master`: `time-travel` and
//! `delta`, newest-to-oldest chains of data-less versions over a master row per tuple) and
//! single-version storage (one-version chains).
//!
//! The transaction code and GC never test which store a table has: they call the table's
//! version operations (`storage/table.rs`: `alloc_version`, `row`, `rewrite_own`,
//! `place_row`, `restore_row`, the chain operations `newest`/`publish`/`unpublish`, and
//! `gc::epoch::prune`), each of which matches on `Store` exhaustively, or ask the store's
//! properties below. A new store is a module here plus one arm in each of those matches and
//! in `VersionStorage::store` (`config.rs`), which maps the configuration onto `Store`.
//!
//! Every version carries Hekaton's Begin and End fields (Hekaton §2.3). Each field is one
//! 64-bit word holding either a timestamp or, with the top bit set, the id of the transaction
//! that wrote it; a transaction id in End is the write lock on the version.

pub mod append_n2o;
pub(crate) mod master;
pub(crate) mod non_inline;
mod pool;
pub mod siro;
pub mod space;
pub(crate) mod zones;

pub use append_n2o::Version;

/// A Begin/End field word: a timestamp, or a transaction id when the top bit is set.
pub(crate) const TXN_BIT: u64 = 1 << 63;
/// End of a version that no one has superseded; also the Begin of an aborted version (so the
/// version is visible to no read time).
pub(crate) const INFINITY: u64 = TXN_BIT - 1;

#[inline]
pub(crate) fn is_txn(word: u64) -> bool {
    word & TXN_BIT != 0
}

/// A table's version store (`VersionStorage::store` in `config.rs` maps the configuration
/// onto it: the version layer does not import the configuration), which the table's version operations
/// match on. Every `match` on it is exhaustive, so a new store is a compile error at each
/// place that must decide for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Store {
    /// Append-only, newest to oldest: the entry points at the newest version, rows inline.
    AppendN2o,
    /// Append-only, oldest to newest: the entry points at the oldest version and `next`
    /// leads to newer ones, so finding the newest walks the chain (thesis §5.4.1).
    AppendO2n,
    /// In place, full copies of older versions (`master`).
    TimeTravel,
    /// In place, older versions as column before-images (`master`).
    Delta,
    /// vDriver's SIRO (`siro`): the newest two rows in two slots of the tuple's master,
    /// older ones relocated into classified segments.
    Siro,
    /// One version per row, rows inline: the single-version protocols buffer a write's
    /// version and install it in place of the old one at commit (`cc/silo.rs`), so chains
    /// hold one version, except while recovery's replay (MVOCC, `Database::begin_replay`)
    /// chains newest-first and GC cuts what it superseded. Which writes are buffered is the
    /// protocol's decision, not the store's.
    SingleVersion,
}

/// Where a store keeps the rows of its versions. Every `match` on it is exhaustive too: a
/// store that places rows its own way (vDriver's SIRO slots) is a new arm, and a compile
/// error at each row operation of `Table` (`alloc_version`, `row`, `rewrite_own`,
/// `place_row`, `restore_row`, `placed_version`, `version_bytes`, `rows_copied`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rows {
    /// In the versions (append-only, single-version; `non_inline` for the stored form).
    Inline,
    /// The newest row in a master per tuple, older ones as images (`master`).
    InPlace(master::InPlace),
    /// Two rows in a master per tuple, older ones in segments (`siro`).
    Siro,
}

/// The order of a chain from its indirection entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    /// The entry points at the newest version; `next` leads to older ones.
    NewestFirst,
    /// The entry points at the oldest version; `next` leads to newer ones.
    OldestFirst,
}

impl Store {
    /// Chain order. Single-version chains hold one version (two only while recovery's
    /// replay supersedes one), newest first.
    #[inline]
    pub(crate) fn order(self) -> Order {
        match self {
            Store::AppendO2n => Order::OldestFirst,
            Store::AppendN2o
            | Store::TimeTravel
            | Store::Delta
            | Store::Siro
            | Store::SingleVersion => Order::NewestFirst,
        }
    }

    /// Where the rows of versions live.
    #[inline]
    pub(crate) fn rows(self) -> Rows {
        match self {
            Store::TimeTravel => Rows::InPlace(master::InPlace::TimeTravel),
            Store::Delta => Rows::InPlace(master::InPlace::Delta),
            Store::Siro => Rows::Siro,
            Store::AppendN2o | Store::AppendO2n | Store::SingleVersion => Rows::Inline,
        }
    }

    /// Whether a writer may take over a write lock (End field) held by an aborted
    /// transaction (Hekaton §2.6). Not in place: the master holds the aborted data until
    /// that transaction's rollback restores it (`master`).
    #[inline]
    pub(crate) fn takes_over_aborted_locks(self) -> bool {
        match self {
            Store::TimeTravel | Store::Delta | Store::Siro => false,
            Store::AppendN2o | Store::AppendO2n | Store::SingleVersion => true,
        }
    }

    /// Whether GC may cut a whole chain whose newest version is a delete every snapshot
    /// sees (entry → null). Not under O2N, where a writer reviving the row links its
    /// version from the tombstone's `next`, nor single-version, where a deleted row's entry
    /// is left to the protocol's commits, which replace an entry only while holding its
    /// record's lock (`cc/silo.rs`).
    #[inline]
    pub(crate) fn gc_cuts_deleted_chains(self) -> bool {
        match self {
            Store::AppendN2o | Store::TimeTravel | Store::Delta | Store::Siro => true,
            Store::AppendO2n | Store::SingleVersion => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Order, Rows};
    use crate::config::{Config, Protocol, VersionStorage};

    /// The store's properties agree with the configuration they come from: in place exactly
    /// where `VersionStorage::in_place` says so, oldest-first exactly for `o2n`, whole
    /// deleted chains left alone exactly on O2N and where single-version protocols run.
    #[test]
    fn every_storage_maps_to_a_store_with_its_properties() {
        for &s in VersionStorage::ALL {
            let store = s.store();
            let in_place = matches!(store.rows(), Rows::InPlace(_) | Rows::Siro);
            assert_eq!(in_place, s.in_place(), "{s:?}");
            assert_eq!(
                store.order() == Order::OldestFirst,
                s == VersionStorage::AppendO2n,
                "{s:?}"
            );
            let single = Protocol::ALL.iter().any(|&p| {
                p.single_version()
                    && Config::new()
                        .protocol(p)
                        .version_storage(s)
                        .validate()
                        .is_ok()
            });
            // A whole deleted chain is cut only newest-first, and not where the protocols'
            // commits own a deleted row's entry.
            assert_eq!(
                store.gc_cuts_deleted_chains(),
                !single && store.order() == Order::NewestFirst,
                "{s:?}"
            );
            // Taking over an aborted writer's lock is refused exactly where the master holds
            // its data until the rollback restores it.
            assert_eq!(store.takes_over_aborted_locks(), !in_place, "{s:?}");
        }
    }

    /// A free token tells `free_token` to skip the image word only for an in-place version
    /// whose word holds a `siro` tag (never an image); an image pointer, or no image yet
    /// (time-travel/delta before a superseder publishes one), leaves it to be read at free.
    #[test]
    fn only_a_tagged_image_word_lets_a_free_skip_the_image() {
        use super::master::Master;
        use super::Version;
        use std::sync::atomic::Ordering;
        let m = Master::alloc(crate::ids::TupleId::new(1), 16);
        let no_image = |v: &Version| v.token() & Version::NO_IMAGE != 0;
        for (word, skips) in [
            (0u64, false),
            (1, true),
            (2, true),
            (3, true),
            (0x1004, true),
        ] {
            let v = Version::alloc_in_place(5, std::ptr::null_mut(), 2, 0, m);
            // SAFETY: fresh and unpublished; only this test holds it.
            let r = unsafe { v.as_ref() };
            r.image_word_ref().store(word, Ordering::Release);
            assert_eq!(no_image(r), skips, "image word {word:#x}");
            // A tag owns nothing: restored to "none" before the free reads it (or not).
            r.image_word_ref().store(0, Ordering::Release);
            // SAFETY: unreachable; never published.
            unsafe { Version::free(v.as_ptr()) };
        }
        // An 8-aligned word is an image: kept in the token's view, freed with the version.
        let v = Version::alloc_in_place(5, std::ptr::null_mut(), 2, 0, m);
        // SAFETY: as above.
        let r = unsafe { v.as_ref() };
        let img = super::master::Image::alloc_for_test(&[7; 16]);
        r.image_word_ref().store(img as u64, Ordering::Release);
        assert!(!no_image(r));
        // SAFETY: as above; the free releases the image through the token.
        unsafe { Version::free(v.as_ptr()) };
        // SAFETY: `m` came from `alloc` and no version refers to it any more.
        unsafe { Master::free(m) };
    }
}
