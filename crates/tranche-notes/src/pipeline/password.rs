//! The rule that makes a client's PDF password from their record. Exchanges ask for
//! something the client knows and the broker need not send: by default the PAN in
//! upper case.

use crate::note::ClientBlock;

/// A template such as `{pan}` or `{pan}{ucc}`; placeholders: `{pan}` (upper case),
/// `{pan_lower}`, `{ucc}` (the client code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasswordRule(String);

impl Default for PasswordRule {
    fn default() -> Self {
        PasswordRule("{pan}".to_string())
    }
}

const PLACEHOLDERS: [&str; 3] = ["{pan}", "{pan_lower}", "{ucc}"];

impl PasswordRule {
    /// Checks the template: at least one placeholder (a constant password would be the
    /// same for every client), and no unknown ones.
    pub fn parse(template: &str) -> Result<Self, String> {
        let mut rest = template;
        let mut found = false;
        while let Some(start) = rest.find('{') {
            let end = rest[start..].find('}').ok_or_else(|| {
                format!("password rule {template:?}: '{{' without a closing '}}'")
            })? + start;
            let name = &rest[start..=end];
            if !PLACEHOLDERS.contains(&name) {
                return Err(format!(
                    "password rule {template:?}: unknown placeholder {name}; expected one of {}",
                    PLACEHOLDERS.join(", ")
                ));
            }
            found = true;
            rest = &rest[end + 1..];
        }
        if !found {
            return Err(format!(
                "password rule {template:?}: needs at least one of {} (a constant password would be the same for every client)",
                PLACEHOLDERS.join(", ")
            ));
        }
        Ok(PasswordRule(template.to_string()))
    }

    pub(crate) fn password(&self, client: &ClientBlock) -> String {
        self.0
            .replace("{pan_lower}", &client.pan.to_lowercase())
            .replace("{pan}", &client.pan.to_uppercase())
            .replace("{ucc}", &client.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> ClientBlock {
        ClientBlock {
            code: "C0001".into(),
            name: "Aarav Shah".into(),
            pan: "abcpe1234f".into(),
            address: String::new(),
            place_of_supply: String::new(),
        }
    }

    #[test]
    fn default_is_the_pan_in_upper_case() {
        assert_eq!(PasswordRule::default().password(&client()), "ABCPE1234F");
    }

    #[test]
    fn templates_combine_fields() {
        let rule = PasswordRule::parse("{ucc}-{pan_lower}").unwrap();
        assert_eq!(rule.password(&client()), "C0001-abcpe1234f");
    }

    #[test]
    fn constant_and_unknown_templates_are_refused() {
        assert!(PasswordRule::parse("secret")
            .unwrap_err()
            .contains("at least one"));
        assert!(PasswordRule::parse("{dob}")
            .unwrap_err()
            .contains("unknown placeholder {dob}"));
        assert!(PasswordRule::parse("{pan").unwrap_err().contains("closing"));
    }
}
