//! The one way every implementation delivers, over the few file operations each
//! provides: look, write a temporary, rename it without clobbering, look again. Kept in
//! one place so the outbox and SFTP cannot drift apart on what "delivered" means.

use async_trait::async_trait;

use crate::{name, sha256_hex, DeliveryError};

/// What a destination must do. Names are checked plain file names or temporaries from
/// [`name::temporary`]; errors name the destination and the file.
#[async_trait]
pub(crate) trait Store: Send + Sync {
    /// [`Delivery::location`](crate::Delivery::location).
    fn location(&self) -> String;

    /// The SHA-256 of the file `name`, read back, or `None` when there is none.
    async fn hash(&self, name: &str) -> Result<Option<String>, DeliveryError>;

    /// Create `temp` (failing if it exists), readable by its owner only, and write
    /// `bytes` to it, flushed and synced where the destination allows, checking that
    /// all of them arrived.
    async fn write_temporary(&self, temp: &str, bytes: &[u8]) -> Result<(), DeliveryError>;

    /// Give `temp` the name `name` in one step, unless `name` exists: `true` when done,
    /// `false` when the name was taken (`temp` is left for the caller to discard).
    async fn publish(&self, temp: &str, name: &str) -> Result<bool, DeliveryError>;

    /// Remove `temp`, best effort: a leftover is never reported as delivered and never
    /// blocks a delivery, it only takes space.
    async fn discard(&self, temp: &str);
}

/// [`Delivery::deliver`](crate::Delivery::deliver) on `store`; `name` is checked.
pub(crate) async fn deliver(
    store: &dyn Store,
    name: &str,
    bytes: &[u8],
) -> Result<(), DeliveryError> {
    let expected = sha256_hex(bytes);
    // Look first: the same file there already is a redelivery after a crash (nothing to
    // do), a different one must stay as it is. Neither needs the upload.
    if let Some(found) = store.hash(name).await? {
        return same_or_exists(store, name, expected, found);
    }
    let temp = name::temporary(name);
    if let Err(e) = store.write_temporary(&temp, bytes).await {
        discard_unless_cut_off(store, &temp, &e).await;
        return Err(e);
    }
    match store.publish(&temp, name).await {
        Ok(true) => return Ok(()),
        Ok(false) => store.discard(&temp).await,
        Err(e) => {
            discard_unless_cut_off(store, &temp, &e).await;
            return Err(e);
        }
    }
    // Someone delivered this name since we looked (another submitter, or an earlier
    // attempt whose answer was lost): fine if it is these bytes.
    match store.hash(name).await? {
        Some(found) => same_or_exists(store, name, expected, found),
        None => Err(DeliveryError::Failed {
            location: store.location(),
            doing: format!("delivering {name}"),
            transient: false,
            source: "a file of that name appeared, then vanished (taken by the bank?) while \
                     this one waited to be renamed into place; not sent again: check with \
                     the bank"
                .into(),
        }),
    }
}

/// Remove the temporary after a failure, unless the connection is gone (a removal
/// would only wait for its timeout; the leftover is harmless).
async fn discard_unless_cut_off(store: &dyn Store, temp: &str, e: &DeliveryError) {
    if !matches!(e, DeliveryError::Connection { .. }) {
        store.discard(temp).await;
    }
}

fn same_or_exists(
    store: &dyn Store,
    name: &str,
    expected: String,
    found: String,
) -> Result<(), DeliveryError> {
    if found == expected {
        Ok(())
    } else {
        Err(DeliveryError::Exists {
            location: store.location(),
            name: name.to_string(),
            expected,
            found,
        })
    }
}
