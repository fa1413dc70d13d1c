//! Sealing what the relay keeps in its database under the operator's key
//! (`CALLPOST_RELAY_SECRET_KEY`): ChaCha20-Poly1305, a fresh nonce per
//! seal, and a name as the associated data, so a sealed value cannot be
//! moved under another name.

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

/// What the key for user ids is derived with (HMAC-SHA256 of this label
/// under the secret key): a value of its own, so the hashes and the seals
/// never share a key.
const USER_ID_LABEL: &[u8] = b"callpost user ids v1";

/// The key that seals what is kept in the database, and keys the hashes of
/// user ids it keeps instead of the ids (suppressions, deletion records).
pub struct SealKey {
    aead: LessSafeKey,
    ids: hmac::Key,
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealKey(***)")
    }
}

impl SealKey {
    /// A key from its base64 form (32 bytes: `openssl rand -base64 32`).
    pub fn parse(text: &str) -> Result<Self, SealError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| SealError::BadKey)?;
        let key = UnboundKey::new(&CHACHA20_POLY1305, &bytes).map_err(|_| SealError::BadKey)?;
        let derived = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &bytes), USER_ID_LABEL);
        Ok(Self {
            aead: LessSafeKey::new(key),
            ids: hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()),
        })
    }

    /// The keyed hash a user id is kept as (HMAC-SHA256, hex): the same id
    /// gives the same hash on every relay with the key, and the hash says
    /// nothing of the id to whoever reads the database without it.
    pub fn user_hash(&self, id: &str) -> String {
        hex::encode(hmac::sign(&self.ids, id.as_bytes()).as_ref())
    }

    /// Seals `plain` under `name`. Fails only when the OS gives no random
    /// bytes for the nonce.
    pub fn seal(&self, name: &str, plain: &str) -> Result<String, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|_| SealError::NoRandomness)?;
        let mut data = plain.as_bytes().to_vec();
        self.aead
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(name.as_bytes()),
                &mut data,
            )
            .map_err(|_| wrong_key(name))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(format!(
            "{SEALED_PREFIX}{}",
            base64::engine::general_purpose::STANDARD.encode(out)
        ))
    }

    /// Opens what [`SealKey::seal`] sealed under `name`.
    pub fn open(&self, name: &str, sealed: &str) -> Result<String, SealError> {
        let bytes = sealed
            .strip_prefix(SEALED_PREFIX)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .filter(|b| b.len() > NONCE_LEN)
            .ok_or_else(|| wrong_key(name))?;
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| wrong_key(name))?;
        let mut data = data.to_vec();
        let plain = self
            .aead
            .open_in_place(nonce, Aad::from(name.as_bytes()), &mut data)
            .map_err(|_| wrong_key(name))?;
        String::from_utf8(plain.to_vec()).map_err(|_| wrong_key(name))
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

    #[test]
    fn a_sealed_value_opens_under_its_name_only_and_shows_nothing() {
        let key = SealKey::parse(KEY).unwrap();
        let sealed = key.seal("shop", "{\"shared_secret\":\"hunter2\"}").unwrap();
        assert!(sealed.starts_with(SEALED_PREFIX));
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
        let other = SealKey::parse("ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=").unwrap();
        assert!(other.open("shop", &sealed).is_err());
        // Two seals of one text differ (a fresh nonce each time).
        assert_ne!(
            sealed,
            key.seal("shop", "{\"shared_secret\":\"hunter2\"}").unwrap()
        );
        assert_eq!(format!("{key:?}"), "SealKey(***)");
    }

    #[test]
    fn a_user_s_hash_is_keyed_and_the_same_for_the_same_id() {
        let key = SealKey::parse(KEY).unwrap();
        let h = key.user_hash("user-1");
        assert_eq!(h.len(), 64);
        assert_eq!(h, SealKey::parse(KEY).unwrap().user_hash("user-1"));
        assert_ne!(h, key.user_hash("user-2"));
        let other = SealKey::parse("ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=").unwrap();
        assert_ne!(h, other.user_hash("user-1"));
        assert!(!h.contains("user"));
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
