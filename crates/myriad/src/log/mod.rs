//! Logging (thesis ch. 4.2, §4.6). The seam is `LogPolicy` in `Config`. Myriad is memory-only
//! so far: `LogPolicy::None` is the only policy accepted by `Config::validate`; the others are
//! rejected with `Error::Unsupported`.
