//! Bearer tokens for the feed, in the tokens-file format of `tranche server` (the
//! [`tranche_tokens`] table: one entry per line or comma-separated, `#` comments,
//! constant-time lookup, never printed) with the feed's own grants:
//!
//! - `TOKEN core` — a trading core: may post events, may not read.
//! - `TOKEN firm=N` — a client of firm N: may read firm N's orders only (no filter or
//!   `firm=N`; a broker or instrument filter, or another firm, is a 403).
//! - `TOKEN reader` — may read every order with any filter, may not post.

use tranche_feed::FirmId;
use tranche_tokens::TokenTable;

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// Post events only.
    Core,
    /// Read one firm's orders only.
    Firm(FirmId),
    /// Read every order.
    Reader,
}

impl tranche_tokens::Grant for Grant {
    const EXPECTED: &'static str = "`TOKEN core`, `TOKEN reader` or `TOKEN firm=N`";

    fn from_word(word: Option<&str>) -> Option<Grant> {
        match word? {
            "core" => Some(Grant::Core),
            "reader" => Some(Grant::Reader),
            word => Some(Grant::Firm(FirmId(
                word.strip_prefix("firm=")?.parse().ok()?,
            ))),
        }
    }
}

/// The feed's accepted tokens; every protocol serving the feed checks the same table
/// ([`TokenTable::check`] with the token as sent, without `Bearer `).
pub type FeedTokens = TokenTable<Grant>;
