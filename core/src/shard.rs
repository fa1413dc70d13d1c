//! Shard groups: which database group keeps a call, once a service has
//! outgrown one database.
//!
//! A call's group is found in two steps. Its **slot** is a hash of its
//! source and its user (the `userId`, else the `anonymousId`, else the
//! `messageId`) into [`SLOTS`] fixed slots; the **slot map**, which the
//! operator writes, says which group holds each slot. The same call always
//! lands in the same slot, so a call an SDK sends again lands in the group
//! that already has it and is stored once; a user's calls stay together.
//!
//! A map changes by moving slots to another group (adding a group is
//! moving some slots to it). Rows never move: a moved slot's earlier calls
//! stay in the group that took them and are delivered from there. What a
//! move must keep is deduplication: a call stored in the old group and
//! sent again after the move would be stored twice. So a map remembers its
//! moves ([`Move`]) for [`MOVE_WINDOW_MS`], and a host checks a moved
//! slot's earlier groups before it stores a call there
//! ([`SlotMap::earlier_groups`]).
//!
//! Maps have a version the operator raises with every change. A host keeps
//! the map in force in the database all its instances share and compares
//! it with its own ([`SlotMap::succeed`]): a newer one replaces it (the
//! moves recorded), the same one is kept, an older or a different one at
//! the same version is refused, so an instance started with an outdated
//! file cannot move slots back.

use crate::code::Code;
use crate::json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How many slots the calls hash into. Fixed for the life of a service:
/// a different number would move every user. 1,024 is enough to move a
/// group's share in steps of 0.1%, and small enough that a map is a short
/// list of ranges.
pub const SLOTS: u16 = 1024;

/// The most groups a map names, the home group included. The relay tells
/// its groups' row ids apart by `id * MAX_GROUPS + group`, so the number
/// bounds the ids too.
pub const MAX_GROUPS: usize = 16;

/// The name of the group that holds what is not spread (sources, endpoint
/// state, audiences) and every slot no other group takes: the relay's
/// `database`.
pub const HOME: &str = "home";

/// How long a moved slot's earlier group is checked for the calls sent
/// again: 24 hours. SDKs retry a batch for minutes (analytics-go backs off
/// up to 10 times, analytics-python and analytics-node fewer), and a
/// buffered browser queue can send a day-old call after the tab comes
/// back; Segment's own deduplication window is 24 hours.
pub const MOVE_WINDOW_MS: i64 = 24 * 60 * 60 * 1000;

/// Why a map or a change of map was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    /// A group's settings are wrong: its name, its slots, or how many
    /// groups there are.
    #[error("{0}")]
    Invalid(String),
    /// The map cannot replace the one in force: it is older, or it is the
    /// same version with other slots, or it drops a group that still
    /// holds calls.
    #[error("{0}")]
    Refused(String),
}

impl ShardError {
    /// The registry's code.
    pub fn code(&self) -> Code {
        match self {
            Self::Invalid(_) => Code::InvalidConfig,
            Self::Refused(_) => Code::DatabaseRefused,
        }
    }
}

/// The slot of a call: FNV-1a (64 bits) of the source's name, a zero byte
/// and the call's user (`userId`, else `anonymousId`, else `messageId`;
/// empty ids count as none), modulo [`SLOTS`].
///
/// FNV-1a because the number must never change (a relay of another version
/// must find the same slot) and be the same on every platform; it is
/// specified in a page and needs no key. A sender who picks user ids to fill
/// one slot loads one group with calls it could have sent anyway, and the
/// per-client limits still hold it.
pub fn slot_of(
    source: &str,
    user_id: Option<&str>,
    anonymous_id: Option<&str>,
    message_id: &str,
) -> u16 {
    let user = [user_id, anonymous_id]
        .into_iter()
        .flatten()
        .find(|s| !s.is_empty())
        .unwrap_or(message_id);
    let mut h = Fnv::default();
    h.write(source.as_bytes());
    h.write(&[0]);
    h.write(user.as_bytes());
    // Below SLOTS, which is a u16.
    u16::try_from(h.0 % u64::from(SLOTS)).unwrap_or(0)
}

/// FNV-1a, 64 bits (the offset basis and prime of the FNV page).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// Slots that went from one group to another, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    /// The slots, as ranges (`"0-255,512"`).
    pub slots: String,
    /// The group that held them before.
    pub from: String,
    /// When the move was recorded, ms since the epoch.
    pub at: i64,
}

/// Which group holds each slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMap {
    version: i64,
    /// The groups, [`HOME`] first, then as the operator named them.
    groups: Vec<String>,
    /// For each slot, its group's index in `groups`.
    owner: Vec<u8>,
    moves: Vec<Move>,
}

impl SlotMap {
    /// The map of a service with one database: every slot at home,
    /// version 0 (what a database with no map kept has in force).
    pub fn single() -> Self {
        Self {
            version: 0,
            groups: vec![HOME.to_owned()],
            owner: vec![0; usize::from(SLOTS)],
            moves: Vec::new(),
        }
    }

    /// The map an operator's settings give: `version` and each group but
    /// home with its slots (ranges: `"0-255, 512"`). Slots no group takes
    /// are home's.
    pub fn configured(version: i64, groups: &[(String, String)]) -> Result<Self, ShardError> {
        let invalid = |m: String| Err(ShardError::Invalid(m));
        if version < 0 {
            return invalid(format!(
                "the slot map's version must be 0 or more, not {version}"
            ));
        }
        if groups.len() + 1 > MAX_GROUPS {
            return invalid(format!(
                "at most {} groups besides home, not {}",
                MAX_GROUPS - 1,
                groups.len()
            ));
        }
        let mut map = Self::single();
        map.version = version;
        for (name, slots) in groups {
            let named_well = !name.is_empty()
                && name.len() <= 64
                && name.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'
                });
            if !named_well {
                return invalid(format!(
                    "a group's name is 1-64 of a-z, 0-9, '-' and '_', not {name:?}"
                ));
            }
            if name == HOME || map.groups.contains(name) {
                return invalid(format!("the group name {name:?} is taken"));
            }
            map.groups.push(name.clone());
            let index = u8::try_from(map.groups.len() - 1).unwrap_or(u8::MAX);
            for slot in parse_slots(slots)? {
                let at = usize::from(slot);
                if map.owner[at] != 0 {
                    let other = &map.groups[usize::from(map.owner[at])];
                    return invalid(format!(
                        "slot {slot} is given to both {other:?} and {name:?}"
                    ));
                }
                map.owner[at] = index;
            }
        }
        Ok(map)
    }

    /// A map as [`SlotMap::to_json`] wrote it.
    pub fn from_json(text: &str) -> Result<Self, ShardError> {
        let damaged =
            |why: &str| ShardError::Refused(format!("the database's slot map is damaged: {why}"));
        let root = Value::from_json_str(text).map_err(|e| damaged(&e.to_string()))?;
        let map = root.as_object().ok_or_else(|| damaged("not an object"))?;
        let version = match map.get("version") {
            Some(Value::Number(n)) if n.fract() == 0.0 && n.abs() < 9e15 => *n as i64,
            _ => return Err(damaged("no version")),
        };
        let groups = match map.get("groups") {
            Some(Value::Object(g)) => g
                .iter()
                .map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| damaged("a group's slots are not text"))?,
            _ => return Err(damaged("no groups")),
        };
        let moves = match map.get("moves") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|m| {
                    let m = m.as_object()?;
                    let at = match m.get("at") {
                        Some(Value::Number(n)) if n.fract() == 0.0 && n.abs() < 9e15 => *n as i64,
                        _ => return None,
                    };
                    Some(Move {
                        slots: m.get("slots")?.as_str()?.to_owned(),
                        from: m.get("from")?.as_str()?.to_owned(),
                        at,
                    })
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| damaged("a move is not {slots, from, at}"))?,
            _ => return Err(damaged("no moves")),
        };
        let mut map = Self::configured(version, &groups).map_err(|e| damaged(&e.to_string()))?;
        map.moves = moves;
        Ok(map)
    }

    /// The kept form: `{"version": n, "groups": {name: slots, ...},
    /// "moves": [{"slots", "from", "at"}, ...]}`, every group but home
    /// (`""`: a group with no slots, kept while it drains).
    pub fn to_json(&self) -> String {
        let mut groups = Map::new();
        for g in &self.groups[1..] {
            groups.insert(g.clone(), self.slots_of(g).into());
        }
        let moves = self
            .moves
            .iter()
            .map(|m| {
                let mut o = Map::new();
                o.insert("slots".into(), m.slots.as_str().into());
                o.insert("from".into(), m.from.as_str().into());
                o.insert("at".into(), Value::Number(m.at as f64));
                Value::Object(o)
            })
            .collect();
        let mut m = Map::new();
        m.insert("version".into(), Value::Number(self.version as f64));
        m.insert("groups".into(), Value::Object(groups));
        m.insert("moves".into(), Value::Array(moves));
        // Strings and safe integers: always writable.
        Value::Object(m).to_json_string().unwrap_or_default()
    }

    /// The version the operator gave it.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// The groups it names, home first.
    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// The moves it remembers.
    pub fn moves(&self) -> &[Move] {
        &self.moves
    }

    /// The index in [`SlotMap::groups`] of the group that holds `slot`.
    pub fn group_of(&self, slot: u16) -> usize {
        self.owner
            .get(usize::from(slot))
            .map_or(0, |g| usize::from(*g))
    }

    /// The slots a group holds, as ranges (`""`: none).
    pub fn slots_of(&self, group: &str) -> String {
        let Some(index) = self.groups.iter().position(|g| g == group) else {
            return String::new();
        };
        ranges((0..SLOTS).filter(|s| usize::from(self.owner[usize::from(*s)]) == index))
    }

    /// The groups `slot` was held by before a move recorded after
    /// `now - MOVE_WINDOW_MS`, newest move first: where a call sent again
    /// may already be.
    pub fn earlier_groups(&self, slot: u16, now: i64) -> Vec<&str> {
        let mut found: Vec<&str> = Vec::new();
        for m in self.moves.iter().rev() {
            if m.at <= now.saturating_sub(MOVE_WINDOW_MS) {
                continue;
            }
            let holds = parse_slots(&m.slots).is_ok_and(|s| s.contains(&slot));
            if holds && !found.contains(&m.from.as_str()) {
                found.push(&m.from);
            }
        }
        found
    }

    /// Whether the two maps put every slot in the same group.
    pub fn same_slots(&self, other: &Self) -> bool {
        (0..SLOTS).all(|s| self.groups[self.group_of(s)] == other.groups[other.group_of(s)])
    }

    /// What to keep in force when this map (an instance's settings) meets
    /// `kept` (the one in force) at `now`: `Ok(None)` when `kept` stands
    /// (the same map), `Ok(Some(map))` for the map to write in its place
    /// (this one, with the slots that moved recorded and the moves older
    /// than [`MOVE_WINDOW_MS`] forgotten), or a refusal.
    pub fn succeed(&self, kept: &Self, now: i64) -> Result<Option<Self>, ShardError> {
        if self.version < kept.version {
            return Err(ShardError::Refused(format!(
                "the database's slot map is version {}, newer than this configuration's ({}): \
                 start the relay with the configuration that has it",
                kept.version, self.version
            )));
        }
        if self.version == kept.version {
            if self.same_slots(kept) {
                return Ok(None);
            }
            return Err(ShardError::Refused(format!(
                "the database's slot map version {} puts slots in other groups than this \
                 configuration's: raise the version with every change of the map",
                kept.version
            )));
        }
        let mut next = self.clone();
        next.moves = kept
            .moves
            .iter()
            .filter(|m| m.at > now.saturating_sub(MOVE_WINDOW_MS))
            .cloned()
            .collect();
        let mut moved: BTreeMap<&str, Vec<u16>> = BTreeMap::new();
        for s in 0..SLOTS {
            let before = &kept.groups[kept.group_of(s)];
            if *before != self.groups[self.group_of(s)] {
                moved.entry(before.as_str()).or_default().push(s);
            }
        }
        for (from, slots) in moved {
            next.moves.push(Move {
                slots: ranges(slots.into_iter()),
                from: from.to_owned(),
                at: now,
            });
        }
        // A group that holds calls must stay reachable: one that held slots,
        // or that a remembered move names, is still in the map.
        let held = (0..SLOTS).map(|s| &kept.groups[kept.group_of(s)]);
        for g in held.chain(next.moves.iter().map(|m| &m.from)) {
            if !next.groups.contains(g) {
                return Err(ShardError::Refused(format!(
                    "the group {g:?} holds calls: keep it in the configuration (with no slots) \
                     until it has none pending and {} hours have passed since its slots moved",
                    MOVE_WINDOW_MS / 3_600_000
                )));
            }
        }
        Ok(Some(next))
    }
}

/// Reads slot ranges: `"0-255, 512, 600-700"` (inclusive, each below
/// [`SLOTS`]); `""` is none.
pub fn parse_slots(text: &str) -> Result<Vec<u16>, ShardError> {
    let mut slots = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || {
            ShardError::Invalid(format!(
                "slots are ranges like \"0-511, 700\" of 0 to {}, not {part:?}",
                SLOTS - 1
            ))
        };
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: u16 = a.trim().parse().map_err(|_| bad())?;
        let b: u16 = b.trim().parse().map_err(|_| bad())?;
        if a > b || b >= SLOTS {
            return Err(bad());
        }
        slots.extend(a..=b);
    }
    Ok(slots)
}

/// Slots in ascending order as ranges (`"0-255,512"`).
fn ranges(slots: impl Iterator<Item = u16>) -> String {
    let mut out = String::new();
    let mut run: Option<(u16, u16)> = None;
    let flush = |out: &mut String, (a, b): (u16, u16)| {
        if !out.is_empty() {
            out.push(',');
        }
        let _ = if a == b {
            write!(out, "{a}")
        } else {
            write!(out, "{a}-{b}")
        };
    };
    for s in slots {
        run = match run {
            Some((a, b)) if s == b + 1 => Some((a, s)),
            Some(r) => {
                flush(&mut out, r);
                Some((s, s))
            }
            None => Some((s, s)),
        };
    }
    if let Some(r) = run {
        flush(&mut out, r);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fnv(bytes: &[u8]) -> u64 {
        let mut h = Fnv::default();
        h.write(bytes);
        h.0
    }

    #[test]
    fn fnv_is_the_published_function() {
        // The FNV page's test vectors for FNV-1a, 64 bits.
        assert_eq!(fnv(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_call_s_slot_is_its_user_s() {
        let s = slot_of("web", Some("u1"), Some("a1"), "m1");
        assert_eq!(s, slot_of("web", Some("u1"), None, "m2"));
        assert_eq!(
            slot_of("web", None, Some("a1"), "m1"),
            slot_of("web", Some(""), Some("a1"), "m9")
        );
        assert_eq!(
            slot_of("web", None, None, "m1"),
            slot_of("web", Some(""), Some(""), "m1")
        );
        // The source counts, and is not run together with the user.
        let spread: std::collections::HashSet<u16> = (0..64)
            .map(|i| slot_of(&format!("s{i}"), Some("u1"), None, "m"))
            .collect();
        assert!(spread.len() > 32, "{spread:?}");
        assert_ne!(
            slot_of("ab", Some("c"), None, ""),
            slot_of("a", Some("bc"), None, "")
        );
    }

    #[test]
    fn users_spread_over_the_slots() {
        let mut counts = vec![0u32; usize::from(SLOTS)];
        for i in 0..102_400 {
            counts[usize::from(slot_of("web", Some(&format!("user-{i}")), None, ""))] += 1;
        }
        // 100 a slot on average; a fair hash stays well inside 50-150.
        assert!(
            counts.iter().all(|c| (50..150).contains(c)),
            "{:?}",
            counts.iter().min()
        );
    }

    fn map(version: i64, groups: &[(&str, &str)]) -> Result<SlotMap, ShardError> {
        let groups: Vec<(String, String)> = groups
            .iter()
            .map(|(a, b)| ((*a).into(), (*b).into()))
            .collect();
        SlotMap::configured(version, &groups)
    }

    #[test]
    fn a_configured_map_gives_the_rest_to_home_and_refuses_bad_settings() {
        let m = map(1, &[("b", "512-1023"), ("c", "")]).unwrap();
        assert_eq!(m.groups(), ["home", "b", "c"]);
        assert_eq!(m.group_of(0), 0);
        assert_eq!(m.group_of(511), 0);
        assert_eq!(m.group_of(512), 1);
        assert_eq!(m.slots_of("home"), "0-511");
        assert_eq!(m.slots_of("b"), "512-1023");
        assert_eq!(m.slots_of("c"), "");
        for (groups, says) in [
            (vec![("b", "0-10"), ("c", "10")], "slot 10 is given to both"),
            (vec![("home", "1")], "taken"),
            (vec![("b", "1"), ("b", "2")], "taken"),
            (vec![("B", "1")], "a group's name"),
            (vec![("", "1")], "a group's name"),
            (vec![("b", "1024")], "slots are ranges"),
            (vec![("b", "5-4")], "slots are ranges"),
            (vec![("b", "x")], "slots are ranges"),
        ] {
            let e = map(1, &groups).unwrap_err();
            assert!(e.to_string().contains(says), "{groups:?}: {e}");
            assert_eq!(e.code(), Code::InvalidConfig);
        }
        let many: Vec<(String, String)> = (0..MAX_GROUPS)
            .map(|i| (format!("g{i}"), String::new()))
            .collect();
        assert!(SlotMap::configured(1, &many).is_err());
        assert!(SlotMap::configured(1, &many[1..]).is_ok());
        assert!(map(-1, &[]).is_err());
    }

    #[test]
    fn a_map_reads_back_what_it_writes() {
        let one = map(3, &[("b", "0-9, 700"), ("c", "")]).unwrap();
        let at = 1_700_000_000_000;
        let two = map(4, &[("b", "0-9, 700"), ("c", "10-19")])
            .unwrap()
            .succeed(&one, at)
            .unwrap()
            .unwrap();
        let back = SlotMap::from_json(&two.to_json()).unwrap();
        assert_eq!(back, two);
        assert!(SlotMap::from_json("{").is_err());
        assert!(SlotMap::from_json(r#"{"version":1,"groups":{"home":"1"}}"#).is_err());
    }

    #[test]
    fn a_newer_map_records_its_moves_and_an_older_one_is_refused() {
        let at = 1_700_000_000_000;
        let single = SlotMap::single();
        assert_eq!(single.succeed(&single, at).unwrap(), None);
        let two = map(1, &[("b", "512-1023")]).unwrap();
        let kept = two.succeed(&single, at).unwrap().unwrap();
        assert_eq!(
            kept.moves(),
            [Move {
                slots: "512-1023".into(),
                from: "home".into(),
                at
            }]
        );
        assert_eq!(kept.earlier_groups(600, at + 1), ["home"]);
        assert!(kept.earlier_groups(100, at + 1).is_empty());
        assert!(kept.earlier_groups(600, at + MOVE_WINDOW_MS).is_empty());
        // The same map again: kept as it is, moves and all.
        assert_eq!(two.succeed(&kept, at + 5).unwrap(), None);
        // Older, or the same version with other slots: refused.
        let e = single.succeed(&kept, at).unwrap_err();
        assert!(
            e.to_string().contains("newer than this configuration's"),
            "{e}"
        );
        assert_eq!(e.code(), Code::DatabaseRefused);
        let e = map(1, &[("b", "0-1023")])
            .unwrap()
            .succeed(&kept, at)
            .unwrap_err();
        assert!(e.to_string().contains("raise the version"), "{e}");
        // A group that holds calls cannot leave.
        let e = map(2, &[]).unwrap().succeed(&kept, at).unwrap_err();
        assert!(e.to_string().contains("\"b\" holds calls"), "{e}");
        // Moving on: both moves remembered, newest first; an old one forgotten.
        let three = map(2, &[("b", "512-1023"), ("c", "0-99")]).unwrap();
        let kept3 = three.succeed(&kept, at + 10).unwrap().unwrap();
        assert_eq!(kept3.moves().len(), 2);
        let four = map(3, &[("b", "0-1023"), ("c", "")]).unwrap();
        let kept4 = four.succeed(&kept3, at + 20).unwrap().unwrap();
        assert_eq!(kept4.earlier_groups(50, at + 21), ["c", "home"]);
        let later = map(4, &[("b", "0-1023"), ("c", "")]).unwrap();
        let kept5 = later
            .succeed(&kept4, at + 20 + MOVE_WINDOW_MS)
            .unwrap()
            .unwrap();
        assert!(kept5.moves().is_empty());
        // Once its moves are forgotten, an empty group may leave.
        let six = map(5, &[("b", "0-1023")]).unwrap();
        assert!(six
            .succeed(&kept5, at + 30 + MOVE_WINDOW_MS)
            .unwrap()
            .is_some());
    }

    #[test]
    fn ranges_are_compact() {
        assert_eq!(ranges([0, 1, 2, 5, 7, 8].into_iter()), "0-2,5,7-8");
        assert_eq!(ranges(std::iter::empty()), "");
        assert_eq!(parse_slots(" 0-2 ,5,7-8 ").unwrap(), [0, 1, 2, 5, 7, 8]);
    }
}
