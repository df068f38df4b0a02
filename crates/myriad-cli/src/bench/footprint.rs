//! The memory a workload's load will take, estimated before loading, so that a size which
//! cannot fit (`--warehouses 100000`) is refused, naming the estimate and the memory available,
//! instead of loading until an allocation fails. `--force` loads anyway.
//!
//! The bytes per unit are measured, not derived from the schema: the peak resident set size
//! (`/usr/bin/time -v`, "Maximum resident set size") of `myriad bench W --duration 0.05
//! --warmup 0 --threads 2 --no-progress` at two sizes, on this repository's mimalloc build
//! with the defaults (mvocc, n2o storage, logical-tid index pointers, huge pages on; THP in
//! `madvise` mode), Linux x86-64, November 2026 (commit 94e56ff); the slope between the two
//! sizes is the per-unit cost, rounded up. The estimate covers the loaded tables only, under
//! those defaults: a run grows them (TPC-C's inserts, the versions updates leave until GC),
//! other storage choices differ somewhat, so a load that fits can still run out of memory
//! later; the check only stops the sizes that cannot fit at all.

/// Peak RSS of a run that loads (almost) nothing: the binary, thread stacks, the engine's
/// fixed tables. The fits' intercepts were 38 MiB (YCSB) to 50 MiB (Smallbank, TATP).
const BASE_BYTES: u64 = 50 << 20;

/// TPC-C's ITEM table (100,000 rows, shared by every warehouse): the TPC-C fit's intercept
/// (75 MiB) less `BASE_BYTES`.
const TPCC_FIXED_BYTES: u64 = 25 << 20;

/// TPC-C, per warehouse (spec scale: 100,000 STOCK, 30,000 CUSTOMER, HISTORY and ORDER rows,
/// ~300,000 ORDER-LINE and 9,000 NEW-ORDER, 10 DISTRICT). Measured: 1 warehouse 251 MiB, 3
/// warehouses 608 MiB peak RSS: 178 MiB each; 8 warehouses took 1,479 MiB (the estimate:
/// 1,515 MiB).
const TPCC_BYTES_PER_WAREHOUSE: u64 = 180 << 20;

/// YCSB, per row besides its attributes: the version header, the primary-index entry and the
/// tuple's slot. Measured (int64x10): 100,000 rows 56 MiB, 400,000 rows 114 MiB peak RSS, 203
/// B per row, of which 10 attributes take 84 (below); 2,000,000 rows took 381 MiB (the
/// estimate: 450 MiB).
const YCSB_BYTES_PER_ROW: u64 = 120;
/// YCSB, per INT attribute per row. Measured: 100 attributes instead of 10 at 100,000 rows
/// added 72 MiB, 8.4 B per attribute.
const YCSB_BYTES_PER_INT_ATTR: u64 = 9;
/// YCSB, per BYTES(100) attribute per row (bytes100x10, inline). Measured: bytes100x10
/// instead of int64x10 at 100,000 rows added 108 MiB, 113 B per attribute more than an INT.
const YCSB_BYTES_PER_BYTES_ATTR: u64 = 122;
/// YCSB, per secondary-index entry (one per row per `--secondary-indexes`). Measured: 10
/// secondary indexes at 100,000 rows added 70 MiB, 73 B per entry.
const YCSB_BYTES_PER_INDEX_ENTRY: u64 = 74;

/// Smallbank, per customer (one row in each of ACCOUNTS, SAVINGS and CHECKING). Measured:
/// 100,000 customers 95 MiB, 400,000 customers 235 MiB, 2,000,000 customers 1,022 MiB peak
/// RSS: 490 B each, 515 B between the two larger sizes.
const SMALLBANK_BYTES_PER_ACCOUNT: u64 = 530;

/// TATP, per subscriber (with its ~2.5 ACCESS_INFO, ~2.5 SPECIAL_FACILITY and ~3.75
/// CALL_FORWARDING rows). Measured: 50,000 subscribers 167 MiB, 200,000 subscribers 523 MiB
/// peak RSS, 2,486 B each; 1,000,000 subscribers took 2,279 MiB (the estimate: 2,434 MiB).
const TATP_BYTES_PER_SUBSCRIBER: u64 = 2500;

/// An estimate of the loaded tables' memory, with what it was computed from (for the
/// message that refuses a load).
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub bytes: u64,
    /// e.g. "--warehouses 100000 at about 180.0 MiB each".
    pub from: String,
}

fn estimate(flag: &str, units: u64, per_unit: u64) -> Estimate {
    Estimate {
        bytes: BASE_BYTES.saturating_add(units.saturating_mul(per_unit)),
        from: format!(
            "{flag} {units} at about {} each",
            super::report::bytes(per_unit)
        ),
    }
}

pub fn tpcc(warehouses: u64) -> Estimate {
    let mut e = estimate("--warehouses", warehouses, TPCC_BYTES_PER_WAREHOUSE);
    e.bytes = e.bytes.saturating_add(TPCC_FIXED_BYTES);
    e
}

pub fn ycsb(rows: u64, attrs: u64, bytes_attrs: bool, secondary_indexes: u64) -> Estimate {
    let per_attr = if bytes_attrs {
        YCSB_BYTES_PER_BYTES_ATTR
    } else {
        YCSB_BYTES_PER_INT_ATTR
    };
    let per_row = YCSB_BYTES_PER_ROW
        + attrs.saturating_mul(per_attr)
        + secondary_indexes.saturating_mul(YCSB_BYTES_PER_INDEX_ENTRY);
    estimate("--rows", rows, per_row)
}

pub fn smallbank(accounts: u64) -> Estimate {
    estimate("--accounts", accounts, SMALLBANK_BYTES_PER_ACCOUNT)
}

pub fn tatp(subscribers: u64) -> Estimate {
    estimate("--subscribers", subscribers, TATP_BYTES_PER_SUBSCRIBER)
}

/// `MemAvailable` from the text of `/proc/meminfo`, in bytes.
pub fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut fields = line.split_whitespace().skip(1);
    let n: u64 = fields.next()?.parse().ok()?;
    match fields.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// The memory available for new allocations without swapping, per the kernel; `None` where
/// there is no `/proc/meminfo` (then nothing is refused).
pub fn mem_available() -> Option<u64> {
    parse_mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// Refuses (with the message to print) an estimate above `available` bytes, unless `force`.
pub fn check(e: &Estimate, available: Option<u64>, force: bool) -> Result<(), String> {
    match available {
        Some(avail) if e.bytes > avail && !force => Err(format!(
            "this needs about {} ({}), more than the {} of memory available \
             (MemAvailable in /proc/meminfo); a smaller size fits, or --force loads anyway",
            super::report::bytes(e.bytes),
            e.from,
            super::report::bytes(avail)
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       32000000 kB\nMemFree:  100 kB\nMemAvailable:   23332220 kB\n";
        assert_eq!(parse_mem_available(text), Some(23_332_220 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: lots kB\n"), None);
    }

    #[test]
    fn an_estimate_above_the_available_memory_is_refused_unless_forced() {
        let gib = 1u64 << 30;
        let e = tpcc(100_000);
        assert!(e.bytes > 1000 * gib, "{e:?}");
        let m = check(&e, Some(16 * gib), false).unwrap_err();
        assert!(
            m.contains("--warehouses 100000") && m.contains("16.0 GiB"),
            "{m}"
        );
        assert!(check(&e, Some(16 * gib), true).is_ok());
        assert!(check(&e, None, false).is_ok());
        // The default sizes fit in a small machine.
        for small in [
            tpcc(1),
            ycsb(1_000_000, 10, false, 0),
            smallbank(1000),
            tatp(100_000),
        ] {
            assert!(check(&small, Some(4 * gib), false).is_ok(), "{small:?}");
        }
        // Sizes grow with every knob.
        assert!(ycsb(1000, 10, true, 0).bytes > ycsb(1000, 10, false, 0).bytes);
        assert!(ycsb(1000, 10, false, 2).bytes > ycsb(1000, 10, false, 0).bytes);
        assert!(ycsb(1000, 100, false, 0).bytes > ycsb(1000, 10, false, 0).bytes);
    }
}
