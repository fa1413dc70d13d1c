//! Sealing what the relay keeps in its database under the operator's key
//! (`CALLPOST_RELAY_SECRET_KEY`): ChaCha20-Poly1305, a fresh nonce per
//! seal, and a name as the associated data, so a sealed value cannot be
//! moved under another name. A sealed value names its key by an id derived
//! from the key (`v2.<id>.<base64>`), so a rotation opens what the previous
//! keys sealed and seals with the new one ([`PREVIOUS_KEYS_VAR`]).

use base64::Engine as _;
use callpost_core::Code;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::hmac;
use std::fmt;

/// The environment variable that holds the key.
pub const SECRET_KEY_VAR: &str = "CALLPOST_RELAY_SECRET_KEY";

/// What a sealed value starts with: the format, so another can follow.
pub(crate) const SEALED_PREFIX: &str = "v1.";

/// Why a key or a sealed value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// The key is not 32 bytes of base64: make one with
    /// `openssl rand -base64 32`.
    #[error("{SECRET_KEY_VAR} must be 32 random bytes in base64 (openssl rand -base64 32)")]
    BadKey,
    /// A value sealed under another key, or under another name, or
    /// damaged: every relay on one database needs the same key.
    #[error(
        "the stored {what} {name:?} does not open with this relay's {SECRET_KEY_VAR} (every \
         relay on one database needs the same key)"
    )]
    WrongKey {
        /// What it is (`source`).
        what: &'static str,
        /// Its name.
        name: String,
    },
    /// The operating system gave no random bytes for the nonce: try again.
    #[error("the operating system gave no random bytes to seal with")]
    NoRandomness,
}

impl SealError {
    /// The registry's code.
    pub fn code(&self) -> Code {
        match self {
            Self::BadKey => Code::InvalidConfig,
            Self::WrongKey { .. } => Code::WrongSecretKey,
            Self::NoRandomness => Code::Unavailable,
        }
    }
}

/// What the first key for user ids is derived with (HMAC-SHA256 of this
/// label under the secret key): a value of its own, so the hashes and the
/// seals never share a key. The database keeps that key afterwards
/// (`store::sealed`), so a rotation of the secret key leaves the hashes.
const USER_ID_LABEL: &[u8] = b"callpost user ids v1";

/// What a key's id is derived with: the id names the key a value was
/// sealed under, and says nothing of it.
const KEY_ID_LABEL: &[u8] = b"callpost key id v1";

/// The environment variable that holds the keys a value may still be
/// sealed under while a rotation runs (comma-separated): opened, never
/// used to seal.
pub const PREVIOUS_KEYS_VAR: &str = "CALLPOST_RELAY_PREVIOUS_SECRET_KEYS";

/// The format of values sealed under a named key: `v2.<key id>.<base64>`.
const SEALED_V2: &str = "v2.";

struct Key {
    /// 8 hex digits, from the key ([`KEY_ID_LABEL`]).
    id: String,
    aead: LessSafeKey,
    /// The first key of the user hashes, derived from this key.
    ids: [u8; 32],
}

fn key_of(text: &str) -> Result<Key, SealError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| SealError::BadKey)?;
    let unbound = UnboundKey::new(&CHACHA20_POLY1305, &bytes).map_err(|_| SealError::BadKey)?;
    let mac = hmac::Key::new(hmac::HMAC_SHA256, &bytes);
    let mut ids = [0u8; 32];
    ids.copy_from_slice(hmac::sign(&mac, USER_ID_LABEL).as_ref());
    Ok(Key {
        id: hex::encode(&hmac::sign(&mac, KEY_ID_LABEL).as_ref()[..4]),
        aead: LessSafeKey::new(unbound),
        ids,
    })
}

/// The keys that seal what is kept in the database: the current one seals,
/// it and the previous ones (while a rotation runs) open.
pub struct SealKey {
    /// The current key first.
    keys: Vec<Key>,
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealKey({}, ***)", self.id())
    }
}

/// Whether `text` is a sealed value (of any key), not plain text: a call,
/// a state or an answer is JSON or words, never this.
pub fn is_sealed(text: &str) -> bool {
    text.starts_with(SEALED_V2) || text.starts_with(SEALED_PREFIX)
}

impl SealKey {
    /// A key from its base64 form (32 bytes: `openssl rand -base64 32`).
    pub fn parse(text: &str) -> Result<Self, SealError> {
        Ok(Self {
            keys: vec![key_of(text)?],
        })
    }

    /// The current key and the previous ones (comma-separated, as in
    /// [`PREVIOUS_KEYS_VAR`]).
    pub fn with_previous(current: &str, previous: &str) -> Result<Self, SealError> {
        let mut keys = vec![key_of(current)?];
        for p in previous.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let k = key_of(p)?;
            if keys.iter().all(|have| have.id != k.id) {
                keys.push(k);
            }
        }
        Ok(Self { keys })
    }

    fn current(&self) -> &Key {
        // `keys` is never empty: both constructors put the current first.
        &self.keys[0]
    }

    /// The current key's id (8 hex digits), which every value it seals
    /// names.
    pub fn id(&self) -> &str {
        &self.current().id
    }

    /// Whether `text` is sealed under the current key (a rotation passes
    /// it by).
    pub fn sealed_now(&self, text: &str) -> bool {
        text.strip_prefix(SEALED_V2)
            .and_then(|t| t.strip_prefix(self.id()))
            .is_some_and(|t| t.starts_with('.'))
    }

    /// The key the user hashes of a database that keeps none yet start
    /// with: derived from the current key, as before the database kept it.
    pub(crate) fn first_ids_key(&self) -> [u8; 32] {
        self.current().ids
    }

    /// Seals `plain` under `name` with the current key. Fails only when the
    /// OS gives no random bytes for the nonce.
    pub fn seal(&self, name: &str, plain: &str) -> Result<String, SealError> {
        let key = self.current();
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|_| SealError::NoRandomness)?;
        let mut data = Vec::with_capacity(NONCE_LEN + plain.len() + 16);
        data.extend_from_slice(&nonce);
        data.extend_from_slice(plain.as_bytes());
        let tag = key
            .aead
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(name.as_bytes()),
                &mut data[NONCE_LEN..],
            )
            .map_err(|_| wrong_key(name))?;
        data.extend_from_slice(tag.as_ref());
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut out = String::with_capacity(SEALED_V2.len() + 9 + (data.len() * 4 / 3) + 4);
        out.push_str(SEALED_V2);
        out.push_str(&key.id);
        out.push('.');
        b64.encode_string(data, &mut out);
        Ok(out)
    }

    /// Opens what [`SealKey::seal`] sealed under `name`, with the key it
    /// names; a value of the first format (no key id) with whichever key
    /// opens it.
    pub fn open(&self, name: &str, sealed: &str) -> Result<String, SealError> {
        let (keys, body): (Vec<&Key>, &str) = if let Some(rest) = sealed.strip_prefix(SEALED_V2) {
            let (id, body) = rest.split_once('.').ok_or_else(|| wrong_key(name))?;
            (self.keys.iter().filter(|k| k.id == id).collect(), body)
        } else if let Some(body) = sealed.strip_prefix(SEALED_PREFIX) {
            (self.keys.iter().collect(), body)
        } else {
            return Err(wrong_key(name));
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(body)
            .ok()
            .filter(|b| b.len() > NONCE_LEN)
            .ok_or_else(|| wrong_key(name))?;
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        for key in keys {
            let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| wrong_key(name))?;
            let mut data = data.to_vec();
            if let Ok(plain) = key
                .aead
                .open_in_place(nonce, Aad::from(name.as_bytes()), &mut data)
            {
                return String::from_utf8(plain.to_vec()).map_err(|_| wrong_key(name));
            }
        }
        Err(wrong_key(name))
    }
}

fn wrong_key(name: &str) -> SealError {
    SealError::WrongKey {
        what: "source",
        name: name.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const OTHER: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

    #[test]
    fn a_sealed_value_opens_under_its_name_only_and_shows_nothing() {
        let key = SealKey::parse(KEY).unwrap();
        let sealed = key.seal("shop", "{\"shared_secret\":\"hunter2\"}").unwrap();
        assert!(sealed.starts_with(&format!("v2.{}.", key.id())), "{sealed}");
        assert!(is_sealed(&sealed) && key.sealed_now(&sealed));
        assert!(!sealed.contains("hunter2"));
        assert_eq!(
            key.open("shop", &sealed).unwrap(),
            "{\"shared_secret\":\"hunter2\"}"
        );
        // Moved under another name, or opened with another key: refused.
        assert_eq!(
            key.open("other", &sealed).unwrap_err().code(),
            Code::WrongSecretKey
        );
        let other = SealKey::parse(OTHER).unwrap();
        assert!(other.open("shop", &sealed).is_err());
        // Two seals of one text differ (a fresh nonce each time).
        assert_ne!(
            sealed,
            key.seal("shop", "{\"shared_secret\":\"hunter2\"}").unwrap()
        );
        assert_eq!(format!("{key:?}"), format!("SealKey({}, ***)", key.id()));
        assert!(!is_sealed("{\"userId\":\"v2.x\"}"));
    }

    #[test]
    fn a_rotation_opens_the_previous_key_s_values_and_seals_with_the_new() {
        let old = SealKey::parse(KEY).unwrap();
        let before = old.seal("message", "{\"a\":1}").unwrap();
        let ring = SealKey::with_previous(OTHER, &format!(" {KEY} ,")).unwrap();
        assert_ne!(ring.id(), old.id());
        assert_eq!(ring.id().len(), 8);
        assert_eq!(ring.open("message", &before).unwrap(), "{\"a\":1}");
        assert!(!ring.sealed_now(&before));
        let after = ring.seal("message", "{\"a\":1}").unwrap();
        assert!(ring.sealed_now(&after));
        // Without the new key, the old relay cannot open the new value.
        assert!(old.open("message", &after).is_err());
        // The first format (no key id) opens with whichever key fits.
        let data = {
            let v2 = old.seal("shop", "x").unwrap();
            let b = v2.rsplit_once('.').unwrap().1.to_owned();
            format!("{SEALED_PREFIX}{b}")
        };
        assert_eq!(ring.open("shop", &data).unwrap(), "x");
        assert!(SealKey::with_previous(KEY, "c2hvcnQ=").is_err());
    }

    #[test]
    fn a_key_must_be_32_bytes_of_base64() {
        for bad in ["c2hvcnQ=", "not base64 at all!"] {
            let e = SealKey::parse(bad).unwrap_err();
            assert_eq!(e.code(), Code::InvalidConfig);
            assert!(e.to_string().contains(SECRET_KEY_VAR), "{e}");
        }
    }
}
