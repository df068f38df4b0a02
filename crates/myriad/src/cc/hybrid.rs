//! HYBRID (thesis §3.5): OCC first, 2PL for a transaction that failed validation. A
//! transaction runs as `occ` (`occ.rs`); after a validation failure (`read_validation`,
//! `phantom`) the slot's next transaction — the retry — runs as `2pl` (`silo.rs`), and so
//! do its retries until one commits. The decision is made at `cc::begin` and recorded at
//! `cc::after_abort`; everything between is OCC's or 2PL's code.

use crate::config::Protocol;
use crate::error::AbortReason;

/// `hybrid`'s per-slot state.
#[derive(Default)]
pub(crate) struct SlotState {
    /// The slot's next transaction runs as 2PL (the last one failed Silo's validation, or
    /// was such a retry and aborted again). A thread normally gets its last slot back
    /// (`Database::start_txn`), so this is its retry; the flag belongs to the slot, not to
    /// the thread, so that engines in one process do not share it.
    pub(crate) retry_2pl: bool,
}

/// `hybrid` (thesis §3.5, HYBRID): the protocol of the slot's next transaction, `occ`
/// or, when the last one failed validation, `2pl`.
pub(crate) fn next(local: &mut SlotState) -> Protocol {
    if std::mem::take(&mut local.retry_2pl) {
        Protocol::TwoPl
    } else {
        Protocol::Occ
    }
}

/// `hybrid`: a transaction of the slot that ran as `ran` aborted for `reason`. After a
/// validation failure under OCC (or Silo), or any serialization failure of the 2PL retry,
/// the next transaction (the retry) runs as 2PL.
pub(crate) fn aborted(local: &mut SlotState, ran: Protocol, reason: AbortReason) {
    let to_2pl = match ran {
        Protocol::Occ | Protocol::Silo => {
            matches!(reason, AbortReason::ReadValidation | AbortReason::Phantom)
        }
        Protocol::TwoPl => reason != AbortReason::UserAbort,
        Protocol::Mvocc
        | Protocol::Mvto
        | Protocol::Mv2pl
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn
        | Protocol::Hybrid => false,
    };
    if to_2pl {
        local.retry_2pl = true;
    }
}
