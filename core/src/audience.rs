//! Audience membership as identify calls (webhooks-destination.md, Events:
//! "Audience and computed-trait delivery").

use crate::call::{Call, CallKind};
use crate::code::Code;
use crate::delivery::state::bad;
use crate::delivery::StateError;
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

impl AudienceSync {
    /// The sync's state as JSON text, to store between syncs and restore
    /// with [`AudienceSync::from_json`]: `{"version": 1, "trait": ...,
    /// "members": [...], "pending": [[user, member, ms], ...]}`.
    pub fn to_json(&self) -> String {
        let mut m = Map::new();
        m.insert("version".into(), Value::Number(1.0));
        m.insert("trait".into(), self.trait_name.as_str().into());
        m.insert(
            "members".into(),
            Value::Array(self.members.iter().map(|u| u.as_str().into()).collect()),
        );
        m.insert(
            "pending".into(),
            Value::Array(
                self.pending
                    .iter()
                    .map(|(u, member, t)| {
                        Value::Array(vec![
                            u.as_str().into(),
                            Value::Bool(*member),
                            Value::Number(t.as_millis() as f64),
                        ])
                    })
                    .collect(),
            ),
        );
        // Strings, booleans and safe integers: always writable.
        Value::Object(m).to_json_string().unwrap_or_default()
    }

    /// Restores a state saved with [`AudienceSync::to_json`].
    pub fn from_json(text: &str) -> Result<Self, StateError> {
        let root = Value::from_json_str(text).map_err(|e| bad(e.to_string()))?;
        let map = root
            .as_object()
            .ok_or_else(|| bad("audience state is not an object"))?;
        if map.get("version") != Some(&Value::Number(1.0)) {
            return Err(bad("audience state version is not 1"));
        }
        let trait_name = map
            .get("trait")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| bad("audience state has no trait"))?
            .to_owned();
        let members = match map.get("members") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<BTreeSet<_>>>()
                .ok_or_else(|| bad("audience members must be strings"))?,
            _ => return Err(bad("audience state has no members")),
        };
        let pending = match map.get("pending") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::Array(e) => match e.as_slice() {
                        [Value::String(u), Value::Bool(m), Value::Number(ms)]
                            if ms.fract() == 0.0 =>
                        {
                            Timestamp::from_millis(*ms as i64)
                                .ok()
                                .map(|t| (u.clone(), *m, t))
                        }
                        _ => None,
                    },
                    _ => None,
                })
                .collect::<Option<VecDeque<_>>>()
                .ok_or_else(|| bad("audience pending changes are misshapen"))?,
            _ => return Err(bad("audience state has no pending list")),
        };
        Ok(Self {
            trait_name,
            members,
            pending,
        })
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
    fn state_round_trips_with_pending_changes() {
        let t = Timestamp::from_millis(1_700_000_000_123).unwrap();
        let mut s = AudienceSync::new("High Value").unwrap();
        s.handle_sync(t, ["a", "b"]);
        let _ = s.poll_call();
        let text = s.to_json();
        let mut back = AudienceSync::from_json(&text).unwrap();
        assert_eq!(back.to_json(), text);
        let call = back.poll_call().unwrap();
        assert_eq!(call.user_id.as_deref(), Some("b"));
        assert_eq!(call.timestamp, Some(t));
        assert!(back.poll_call().is_none());
        back.handle_sync(t, ["b"]);
        assert_eq!(back.poll_call().unwrap().user_id.as_deref(), Some("a"));
        for broken in [
            "{}",
            "[]",
            r#"{"version":2}"#,
            r#"{"version":1,"trait":"x","members":[1],"pending":[]}"#,
        ] {
            assert_eq!(
                AudienceSync::from_json(broken).unwrap_err().code(),
                "invalid_state"
            );
        }
    }

    #[test]
    fn bad_names() {
        assert_eq!(
            AudienceSync::new(" !! ").unwrap_err().code(),
            "invalid_audience_name"
        );
    }
}
