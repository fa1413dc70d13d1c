//! Audience membership as identify calls (webhooks-destination.md, Events:
//! "Audience and computed-trait delivery").

use crate::call::{Call, CallKind};
use crate::error::Code;
use crate::json::{Map, Quoted, Value};
use crate::timestamp::Timestamp;
use heck::ToSnakeCase;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};

/// An audience name that has no letters or digits, so no trait name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AudienceError {
    /// The name has no letter or digit. Give the audience a real name.
    #[error("audience name {} has no letters or digits", Quoted(.0))]
    InvalidName(String),
}

impl AudienceError {
    /// Stable snake_case code, identical in Rust, Python and JS.
    pub fn code(&self) -> Code {
        match self {
            Self::InvalidName(_) => Code::InvalidAudienceName,
        }
    }
}

/// The trait name for an audience: its snake_case form, by `heck`'s rules.
///
/// * Words split at spaces, punctuation and any other character that is not
///   a letter or digit; those characters are dropped and words are joined
///   with one `_`. Leading and trailing separators vanish.
/// * camelCase splits into words (`highValue` → `high_value`), and so do
///   acronyms before a word (`VIPUsers` → `vip_users`).
/// * A digit stays with the letters before it (`Top10Users` → `top10_users`).
/// * Non-ASCII letters are kept and lowercased by Unicode's rules
///   (`Café Größe` → `café_größe`); nothing is transliterated.
pub fn trait_name(audience: &str) -> Result<String, AudienceError> {
    let name = audience.to_snake_case();
    if name.is_empty() {
        return Err(AudienceError::InvalidName(audience.to_owned()));
    }
    Ok(name)
}

/// Membership sync for one audience, sans I/O.
///
/// Call [`AudienceSync::handle_sync`] with the full current member list at
/// each sync, then drain [`AudienceSync::poll_call`]. The first sync yields
/// `{trait: true}` for every member; later syncs yield only users who joined
/// (`true`) or left (`false`). Calls come out ordered by user id, so the same
/// inputs always give the same calls.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AudienceSync {
    trait_name: String,
    members: BTreeSet<String>,
    pending: VecDeque<(String, bool, Timestamp)>,
}

impl AudienceSync {
    /// A sync for the audience called `audience`, which has not synced yet.
    pub fn new(audience: &str) -> Result<Self, AudienceError> {
        Ok(Self {
            trait_name: trait_name(audience)?,
            members: BTreeSet::new(),
            pending: VecDeque::new(),
        })
    }

    /// The trait this audience sets.
    pub fn trait_name(&self) -> &str {
        &self.trait_name
    }

    /// Records the audience's members as of `now`. Empty user ids are
    /// ignored (an identify needs a user id).
    pub fn handle_sync<I, S>(&mut self, now: Timestamp, members: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let current: BTreeSet<String> = members
            .into_iter()
            .map(Into::into)
            .filter(|s| !s.is_empty())
            .collect();
        let mut changes: Vec<(&String, bool)> = current
            .difference(&self.members)
            .map(|u| (u, true))
            .chain(self.members.difference(&current).map(|u| (u, false)))
            .collect();
        changes.sort_unstable();
        self.pending
            .extend(changes.into_iter().map(|(u, m)| (u.clone(), m, now)));
        self.members = current;
    }

    /// The next identify call to send, or `None`. Changes after
    /// [`AudienceSync::handle_sync`].
    #[must_use]
    pub fn poll_call(&mut self) -> Option<Call> {
        let (user, member, now) = self.pending.pop_front()?;
        let mut traits = Map::new();
        traits.insert(self.trait_name.clone(), Value::Bool(member));
        let mut call = Call::new(CallKind::Identify);
        call.user_id = Some(user);
        call.traits = Some(traits.into());
        call.timestamp = Some(now);
        Some(call)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sync_yields_changes_in_order() {
        let t = Timestamp::from_millis(0).unwrap();
        let mut s = AudienceSync::new("High Value Users").unwrap();
        s.handle_sync(t, ["c", "a", "b"]);
        let drain = |s: &mut AudienceSync| {
            std::iter::from_fn(|| s.poll_call())
                .map(|c| {
                    let v = c.traits.unwrap().to_map()["high_value_users"].clone();
                    (c.user_id.unwrap(), v)
                })
                .collect::<Vec<_>>()
        };
        let first = drain(&mut s);
        assert_eq!(
            first,
            [
                ("a".into(), Value::Bool(true)),
                ("b".into(), Value::Bool(true)),
                ("c".into(), Value::Bool(true))
            ]
        );
        s.handle_sync(t, ["b", "d", "c"]);
        assert_eq!(
            drain(&mut s),
            [
                ("a".into(), Value::Bool(false)),
                ("d".into(), Value::Bool(true))
            ]
        );
        s.handle_sync(t, ["b", "d", "c"]);
        assert!(drain(&mut s).is_empty());
    }

    #[test]
    fn bad_names() {
        assert_eq!(
            AudienceSync::new(" !! ").unwrap_err().code(),
            "invalid_audience_name"
        );
    }
}
