//! Broker URLs in messages: never with their secrets.

/// `url` for messages, with whatever may hold a secret masked: the user name and
/// password (`redis://:secret@host:6379/0` → `redis://***@host:6379/0`) and the query
/// (a Unix socket URL carries its password as `?pass=`). Works on the text, so that a
/// URL too broken to parse is masked too.
pub fn redacted_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    // The last '@': a password may itself hold '@', '/', '?' or '#' unencoded.
    let (masked_user, rest) = match rest.rfind('@') {
        Some(i) => ("***@", &rest[i + 1..]),
        None => ("", rest),
    };
    let (rest, masked_query) = match rest.find('?') {
        Some(i) => (&rest[..i], "?***"),
        None => (rest, ""),
    };
    format!("{scheme}{masked_user}{rest}{masked_query}")
}

#[cfg(test)]
mod tests {
    use super::redacted_url;

    #[test]
    fn secrets_are_masked() {
        assert_eq!(
            redacted_url("redis://:secret@10.0.0.5:6379/0"),
            "redis://***@10.0.0.5:6379/0"
        );
        assert_eq!(
            redacted_url("redis://admin:s3cr@t/x?#@host:6380"),
            "redis://***@host:6380"
        );
        assert_eq!(
            redacted_url("redis+unix:///run/redis.sock?db=1&pass=secret"),
            "redis+unix:///run/redis.sock?***"
        );
        assert_eq!(redacted_url("user:secret@host"), "***@host");
        assert_eq!(
            redacted_url("redis://127.0.0.1:6379/"),
            "redis://127.0.0.1:6379/"
        );
    }
}
