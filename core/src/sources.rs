//! The rules for the sources a host keeps (the relay's configuration, and
//! whatever else gives it sources): each source's name and write keys, and
//! what a set of sources must not repeat. A source's destination is
//! checked by [`crate::Webhooks`], and its protections by
//! [`ProtectionConfig::validate`].

use crate::code::Code;
use crate::ops::shown_url;
use crate::protection::ProtectionConfig;
use std::collections::{HashMap, HashSet};

/// The longest source name, in characters: it is stored with every call,
/// and with the messageId it makes the deduplication key.
pub const MAX_SOURCE_NAME_LEN: usize = 100;

/// The most destinations one source has. A call is stored once for each
/// destination whose trigger it meets, so this bounds the rows one call
/// makes; Segment's Webhooks (Actions) setups run a handful of mappings
/// per source.
pub const MAX_DESTINATIONS: usize = 16;

/// The longest destination name, in characters: it is stored with every
/// call it takes, and named in metrics, URLs and the command line.
pub const MAX_DESTINATION_NAME_LEN: usize = 64;

/// The name of the destination a source's `webhooks` settings stand for:
/// a source with one destination, as the spec's Webhooks destination is.
pub const DEFAULT_DESTINATION: &str = "webhooks";

/// How often a host that keeps its sources in a shared database reads them
/// again: a change made through one relay is in force on every relay on the
/// database within this (and the read's own time). A read of a few rows
/// every 2 s costs the database nothing; Svix and Convoy cache endpoint
/// settings for seconds as well.
pub const SOURCES_POLL_MS: u64 = 2_000;

/// A source, or a set of them, that cannot be used. Messages name the
/// source, never a write key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The name is empty, too long or holds a control character.
    #[error("a source name must be 1 to {MAX_SOURCE_NAME_LEN} characters, none of them a control character")]
    Name,
    /// The source has no write key.
    #[error("source {0:?} needs at least one write key")]
    NoWriteKey(String),
    /// One of its write keys is empty.
    #[error("source {0:?}: a write key must not be empty")]
    EmptyWriteKey(String),
    /// Two sources have this name.
    #[error("source names must be unique: {0:?} is used twice")]
    DuplicateName(String),
    /// The source has a write key another source has: a call could not be
    /// told apart. The other source is not named: whoever can add a
    /// source must not learn which source holds a key they guessed.
    #[error("source {0:?}: a write key it lists is taken (by another source, or listed twice); each source needs keys of its own")]
    SharedWriteKey(String),
    /// A destination name that is empty, too long, or holds a character
    /// other than ASCII letters, digits, `_`, `-` and `.`.
    #[error("source {0:?}: a destination name must be 1 to {MAX_DESTINATION_NAME_LEN} of A-Z, a-z, 0-9, '_', '-' and '.', not {1:?}")]
    DestinationName(String, String),
    /// Two destinations of a source share a name.
    #[error("source {0:?}: destination names must be unique: {1:?} is used twice")]
    DuplicateDestination(String, String),
    /// More than [`MAX_DESTINATIONS`].
    #[error("source {0:?} has {1} destinations; a source has at most {MAX_DESTINATIONS}")]
    TooManyDestinations(String, usize),
    /// Two sources protect one endpoint URL differently: a URL is one
    /// receiver whichever source posts to it.
    #[error("source {name:?}: {url} has other protection settings in another source")]
    ProtectionConflict {
        /// The second source.
        name: String,
        /// The URL, shown without credentials or query.
        url: String,
    },
}

impl SourceError {
    /// Always [`Code::InvalidSettings`].
    pub fn code(&self) -> Code {
        Code::InvalidSettings
    }
}

/// Checks the names of one source's destinations: each 1 to
/// [`MAX_DESTINATION_NAME_LEN`] of ASCII letters, digits, `_`, `-` and
/// `.` (they are metric label values and path segments as they are), no
/// name twice, at most [`MAX_DESTINATIONS`].
pub fn check_destination_names<N: AsRef<str>>(
    source: &str,
    names: &[N],
) -> Result<(), SourceError> {
    if names.len() > MAX_DESTINATIONS {
        return Err(SourceError::TooManyDestinations(
            source.to_owned(),
            names.len(),
        ));
    }
    let mut seen = HashSet::new();
    for name in names {
        let name = name.as_ref();
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if name.is_empty() || name.len() > MAX_DESTINATION_NAME_LEN || !name.chars().all(allowed) {
            return Err(SourceError::DestinationName(
                source.to_owned(),
                name.to_owned(),
            ));
        }
        if !seen.insert(name) {
            return Err(SourceError::DuplicateDestination(
                source.to_owned(),
                name.to_owned(),
            ));
        }
    }
    Ok(())
}

/// Checks one source's name and write keys.
pub fn check_source<K: AsRef<str>>(name: &str, write_keys: &[K]) -> Result<(), SourceError> {
    // Control characters (a newline, an escape) would be printed raw in
    // logs and the console's text, where a name could forge a line.
    if name.is_empty()
        || name.chars().count() > MAX_SOURCE_NAME_LEN
        || name.chars().any(char::is_control)
    {
        return Err(SourceError::Name);
    }
    if write_keys.is_empty() {
        return Err(SourceError::NoWriteKey(name.to_owned()));
    }
    if write_keys.iter().any(|k| k.as_ref().is_empty()) {
        return Err(SourceError::EmptyWriteKey(name.to_owned()));
    }
    Ok(())
}

/// A set of sources being put together: each one added is checked against
/// those before it.
#[derive(Debug, Default)]
pub struct SourceSet {
    names: HashSet<String>,
    /// The write keys of the sources added.
    owners: HashSet<String>,
    /// endpoint URL → its protection settings, where a source gave some.
    protections: HashMap<String, ProtectionConfig>,
}

impl SourceSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a source ([`check_source`] first): its name and write keys
    /// must be new to the set, and the protections it gives its endpoint
    /// URLs must match any another source gave the same URL. An error
    /// leaves the set as it was.
    pub fn add<'a, K: AsRef<str>>(
        &mut self,
        name: &str,
        write_keys: &[K],
        protections: impl IntoIterator<Item = (&'a str, ProtectionConfig)>,
    ) -> Result<(), SourceError> {
        check_source(name, write_keys)?;
        if self.names.contains(name) {
            return Err(SourceError::DuplicateName(name.to_owned()));
        }
        let mut keys: HashSet<&str> = HashSet::new();
        for k in write_keys {
            let k = k.as_ref();
            if self.owners.contains(k) || !keys.insert(k) {
                return Err(SourceError::SharedWriteKey(name.to_owned()));
            }
        }
        let protections: Vec<(&str, ProtectionConfig)> = protections.into_iter().collect();
        for (url, p) in &protections {
            let before = self.protections.get(*url).or_else(|| {
                protections
                    .iter()
                    .find(|(u, _)| u == url)
                    .map(|(_, first)| first)
            });
            if before.is_some_and(|b| b != p) {
                return Err(SourceError::ProtectionConflict {
                    name: name.to_owned(),
                    url: shown_url(url),
                });
            }
        }
        self.names.insert(name.to_owned());
        self.owners.extend(keys.into_iter().map(str::to_owned));
        for (url, p) in protections {
            self.protections.insert(url.to_owned(), p);
        }
        Ok(())
    }

    /// The protections given, by endpoint URL.
    pub fn into_protections(self) -> HashMap<String, ProtectionConfig> {
        self.protections
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_source_needs_a_name_and_keys() {
        assert_eq!(check_source("web", &["wk"]), Ok(()));
        assert_eq!(check_source("", &["wk"]), Err(SourceError::Name));
        for bad in [
            "a\0b",
            "web\nINFO forged line",
            "a\u{1b}[31mred",
            "a\u{7f}",
            "a\u{85}b",
        ] {
            assert_eq!(
                check_source(bad, &["wk"]),
                Err(SourceError::Name),
                "{bad:?}"
            );
        }
        assert_eq!(check_source("Boutique é ☕ shop", &["wk"]), Ok(()));
        let long = "é".repeat(MAX_SOURCE_NAME_LEN + 1);
        assert_eq!(check_source(&long, &["wk"]), Err(SourceError::Name));
        let longest = "é".repeat(MAX_SOURCE_NAME_LEN);
        assert_eq!(check_source(&longest, &["wk"]), Ok(()));
        let none: [&str; 0] = [];
        assert_eq!(
            check_source("web", &none),
            Err(SourceError::NoWriteKey("web".into()))
        );
        assert_eq!(
            check_source("web", &["wk", ""]),
            Err(SourceError::EmptyWriteKey("web".into()))
        );
    }

    #[test]
    fn destination_names_are_plain_unique_and_few() {
        assert_eq!(
            check_destination_names("s", &["crm", "warehouse_1", "chat.v2", "A-b"]),
            Ok(())
        );
        for bad in [
            "",
            "a b",
            "crm/1",
            "é",
            &"x".repeat(MAX_DESTINATION_NAME_LEN + 1),
        ] {
            assert_eq!(
                check_destination_names("s", &[bad]),
                Err(SourceError::DestinationName("s".into(), bad.into())),
                "{bad:?}"
            );
        }
        assert_eq!(
            check_destination_names("s", &["crm", "crm"]),
            Err(SourceError::DuplicateDestination("s".into(), "crm".into()))
        );
        let many: Vec<String> = (0..=MAX_DESTINATIONS).map(|i| format!("d{i}")).collect();
        assert_eq!(
            check_destination_names("s", &many),
            Err(SourceError::TooManyDestinations(
                "s".into(),
                MAX_DESTINATIONS + 1
            ))
        );
    }

    #[test]
    fn a_set_repeats_no_name_or_key_and_protects_a_url_one_way() {
        let url = "https://user:pw@hooks.example.com/in?token=t";
        let five = ProtectionConfig {
            rate_per_second: Some(5),
            ..ProtectionConfig::default()
        };
        let mut set = SourceSet::new();
        set.add("a", &["ka"], [(url, five)]).unwrap();
        set.add("b", &["kb"], [(url, five)]).unwrap();
        assert_eq!(
            set.add("a", &["kc"], []),
            Err(SourceError::DuplicateName("a".into()))
        );
        let e = set.add("c", &["kb"], []).unwrap_err();
        assert_eq!(e, SourceError::SharedWriteKey("c".into()));
        assert!(!e.to_string().contains("kb"), "{e}");
        assert!(
            !e.to_string().contains("\"b\""),
            "the holder is not named: {e}"
        );
        let e = set.add("d", &["kd"], [(url, ProtectionConfig::default())]);
        let e = e.unwrap_err();
        assert!(
            e.to_string().contains("hooks.example.com/in")
                && !e.to_string().contains("pw")
                && !e.to_string().contains("token"),
            "{e}"
        );
        assert_eq!(e.code(), Code::InvalidSettings);
        assert_eq!(set.into_protections().get(url), Some(&five));
    }
}
