//! Checking one event against the order's current version: the result is the order's
//! next version, or an error naming the event and the field.

use crate::model::{Event, Order, OrderId, Status};

/// The largest quantity an order may have.
pub const MAX_QUANTITY: u64 = 1_000_000_000_000_000;
/// The largest absolute price (in ticks) an order may have.
pub const MAX_PRICE: i64 = 1_000_000_000_000_000;

/// An event a batch was refused for: nothing of the batch was applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event {index} (order {order}), field {field}: {problem}")]
pub struct BatchError {
    /// The event's index in its batch (0-based).
    pub index: usize,
    /// The order it was about.
    pub order: OrderId,
    /// The field at fault (`seq`, `rec`, `id`, `quantity`, `filled`, `status`, …).
    pub field: &'static str,
    /// What was expected and what came ("expected more than 41, got 40").
    pub problem: String,
}

/// The highest sequence and record numbers accepted so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Marks {
    pub seq: u64,
    pub rec: u64,
}

/// Checks `event` (the `index`th of its batch) against `current`, the order's latest
/// version (`None`: unknown), and the marks; returns the order's next version.
pub(crate) fn next_version(
    index: usize,
    event: &Event,
    current: Option<&Order>,
    marks: &Marks,
) -> Result<Order, BatchError> {
    let fail = |field: &'static str, problem: String| BatchError {
        index,
        order: event.order_id(),
        field,
        problem,
    };
    if event.seq() <= marks.seq {
        return Err(fail(
            "seq",
            format!("expected more than {}, got {}", marks.seq, event.seq()),
        ));
    }
    let check_amounts = |price: i64, quantity: u64| {
        if !(-MAX_PRICE..=MAX_PRICE).contains(&price) {
            return Err(fail(
                "price",
                format!("expected at most {MAX_PRICE} ticks either side of zero, got {price}"),
            ));
        }
        if !(1..=MAX_QUANTITY).contains(&quantity) {
            return Err(fail(
                "quantity",
                format!("expected 1 to {MAX_QUANTITY}, got {quantity}"),
            ));
        }
        Ok(())
    };
    match event {
        Event::Insert(new) => {
            if let Some(known) = current {
                return Err(fail(
                    "id",
                    format!(
                        "expected an order not in the store, got one already known (rec {})",
                        known.rec
                    ),
                ));
            }
            if new.rec <= marks.rec {
                return Err(fail(
                    "rec",
                    format!("expected more than {}, got {}", marks.rec, new.rec),
                ));
            }
            check_amounts(new.price, new.quantity)?;
            if new.created_at == 0 {
                return Err(fail(
                    "created_at",
                    "expected nanoseconds since the epoch, got 0".into(),
                ));
            }
            Ok(Order {
                id: new.id,
                firm: new.firm,
                broker: new.broker,
                instrument: new.instrument,
                side: new.side,
                price: new.price,
                quantity: new.quantity,
                filled: 0,
                status: Status::New,
                created_at: new.created_at,
                updated_at: new.created_at,
                seq: new.seq,
                rec: new.rec,
            })
        }
        Event::Change(change) => {
            let Some(known) = current else {
                return Err(fail(
                    "id",
                    "expected a known order, got an unknown one".into(),
                ));
            };
            if known.status.is_terminal() {
                return Err(fail(
                    "status",
                    format!(
                        "expected an open order, got one already {:?} at seq {}",
                        known.status, known.seq
                    ),
                ));
            }
            check_amounts(change.price, change.quantity)?;
            if change.filled > change.quantity {
                return Err(fail(
                    "filled",
                    format!(
                        "expected at most the quantity {}, got {}",
                        change.quantity, change.filled
                    ),
                ));
            }
            if change.filled < known.filled {
                return Err(fail(
                    "filled",
                    format!(
                        "expected at least the {} already filled, got {}",
                        known.filled, change.filled
                    ),
                ));
            }
            let consistent = match change.status {
                Status::New => {
                    return Err(fail(
                        "status",
                        "expected a change's status, got New (only an insert is New)".into(),
                    ))
                }
                Status::Amended => change.filled < change.quantity,
                Status::PartiallyFilled => change.filled > 0 && change.filled < change.quantity,
                Status::Filled => change.filled == change.quantity,
                Status::Cancelled | Status::Rejected | Status::Expired => true,
            };
            if !consistent {
                return Err(fail(
                    "status",
                    format!(
                        "expected a status matching {} filled of {}, got {:?}",
                        change.filled, change.quantity, change.status
                    ),
                ));
            }
            if change.updated_at < known.updated_at {
                return Err(fail(
                    "updated_at",
                    format!(
                        "expected at least the previous {}, got {}",
                        known.updated_at, change.updated_at
                    ),
                ));
            }
            Ok(Order {
                price: change.price,
                quantity: change.quantity,
                filled: change.filled,
                status: change.status,
                updated_at: change.updated_at,
                seq: change.seq,
                ..*known
            })
        }
    }
}
