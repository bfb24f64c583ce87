//! ZMTP's CURVE security mechanism (ZeroMQ RFC 25, built on CurveZMQ,
//! RFC 26): the four handshake commands for both sides, and the boxes
//! every frame travels in afterwards. Pure functions of bytes and keys,
//! so each check is tested without sockets; the cryptography is
//! RustCrypto's `crypto_box` (X25519, XSalsa20, Poly1305), the same
//! construction libsodium's `crypto_box` is.
//!
//! Keys come from a connection file as jupyter_client writes them (Z85,
//! 40 characters each). The kernel serves with its long-term pair; a
//! client proves it holds its own long-term key by the vouch in INITIATE.
//! As in a libzmq server without an authentication handler, any client
//! key that vouches for itself is accepted: knowing the server's public
//! key is what the connection file grants.

use bytes::{BufMut, Bytes, BytesMut};
pub use crypto_box::PublicKey;
use crypto_box::aead::AeadCore;
use crypto_box::aead::generic_array::typenum::U24;
use crypto_box::aead::rand_core::RngCore;
use crypto_box::aead::{AeadInPlace, KeyInit, OsRng};
use crypto_box::{SalsaBox, SecretKey};
use crypto_secretbox::XSalsa20Poly1305;

use super::codec::{self, PeerReady};

/// The mechanism's name in the greeting.
pub const NAME: &[u8] = b"CURVE";

const KEY: usize = 32;
const TAG: usize = 16;
/// HELLO: name, version, padding, C', short nonce, box of 64 zeros.
const HELLO_LEN: usize = 6 + 2 + 72 + KEY + 8 + 64 + TAG;
/// WELCOME: name, long nonce, box of S' and the cookie.
const WELCOME_LEN: usize = 8 + 16 + KEY + COOKIE_LEN + TAG;
/// The cookie: a long nonce and a box of C' and s' only the server opens.
const COOKIE_LEN: usize = 16 + 2 * KEY + TAG;
/// INITIATE at least: name, cookie, short nonce, box of C, vouch nonce
/// and vouch box (metadata follows).
const INITIATE_MIN: usize = 9 + COOKIE_LEN + 8 + TAG + KEY + 16 + 2 * KEY + TAG;
/// The bytes a MESSAGE adds to a frame: name, short nonce, tag, flags.
pub const MESSAGE_OVERHEAD: usize = 8 + 8 + TAG + 1;

const FLAG_MORE: u8 = 0x01;
const FLAG_COMMAND: u8 = 0x02;

/// Why a CURVE peer was refused; the connection is then closed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CurveError {
    #[error("expected a {expected} command of the CURVE handshake")]
    Unexpected { expected: &'static str },
    #[error("a {0} box did not open (wrong key or tampered bytes)")]
    BadBox(&'static str),
    #[error("the cookie in INITIATE is not the one this connection sent")]
    BadCookie,
    #[error("the vouch in INITIATE does not match the connection's keys")]
    BadVouch,
    #[error("a nonce was used again or went backwards")]
    ReplayedNonce,
    #[error(transparent)]
    Properties(#[from] codec::ProtocolError),
}

/// Why keys could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("{0} is not a Z85-encoded 32-byte key")]
    NotZ85(&'static str),
    #[error("curve_publickey is not the public key of curve_secretkey")]
    Mismatch,
    #[error("the connection file has {0} but not {1}")]
    Half(&'static str, &'static str),
}

/// A long-term key pair. Its `Debug` shows the public half only.
#[derive(Clone)]
pub struct Keypair {
    public: PublicKey,
    secret: SecretKey,
}

impl std::fmt::Debug for Keypair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keypair({})", self.public_z85())
    }
}

impl Keypair {
    /// A fresh random pair.
    pub fn generate() -> Self {
        let secret = SecretKey::generate(&mut OsRng);
        Self {
            public: secret.public_key(),
            secret,
        }
    }

    /// The pair given as Z85 text; the public half must belong to the secret.
    pub fn from_z85(public: &str, secret: &str) -> Result<Self, KeyError> {
        let public = public_key_from_z85(public, "curve_publickey")?;
        let secret = SecretKey::from_bytes(z85_key(secret, "curve_secretkey")?);
        if secret.public_key() != public {
            return Err(KeyError::Mismatch);
        }
        Ok(Self { public, secret })
    }

    /// The keys in a connection file's JSON (`curve_publickey`,
    /// `curve_secretkey`), if it has them.
    pub fn from_connection_file(json: &serde_json::Value) -> Result<Option<Self>, KeyError> {
        let text = |name| json.get(name).and_then(serde_json::Value::as_str);
        match (text("curve_publickey"), text("curve_secretkey")) {
            (None, None) => Ok(None),
            (Some(public), Some(secret)) => Self::from_z85(public, secret).map(Some),
            (Some(_), None) => Err(KeyError::Half("curve_publickey", "curve_secretkey")),
            (None, Some(_)) => Err(KeyError::Half("curve_secretkey", "curve_publickey")),
        }
    }

    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The public key as Z85 text.
    pub fn public_z85(&self) -> String {
        z85::encode(self.public.as_bytes())
    }

    /// The secret key as Z85 text (for writing a connection file).
    pub fn secret_z85(&self) -> String {
        z85::encode(self.secret.to_bytes())
    }
}

/// A public key given as Z85 text.
pub fn public_key_from_z85(text: &str, what: &'static str) -> Result<PublicKey, KeyError> {
    Ok(PublicKey::from_bytes(z85_key(text, what)?))
}

fn z85_key(text: &str, what: &'static str) -> Result<[u8; KEY], KeyError> {
    z85::decode(text.trim())
        .ok()
        .and_then(|bytes| <[u8; KEY]>::try_from(bytes).ok())
        .ok_or(KeyError::NotZ85(what))
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    OsRng.fill_bytes(&mut bytes);
    bytes
}

fn nonce(prefix: &[u8], tail: &[u8]) -> crypto_box::Nonce {
    let mut nonce = crypto_box::Nonce::default();
    nonce[..prefix.len()].copy_from_slice(prefix);
    nonce[prefix.len()..].copy_from_slice(tail);
    nonce
}

/// `plain` boxed for `theirs` by `ours`: the tag, then the ciphertext.
fn seal(theirs: &PublicKey, ours: &SecretKey, nonce: &crypto_box::Nonce, plain: &[u8]) -> Vec<u8> {
    seal_with(&SalsaBox::new(theirs, ours), nonce, plain)
}

fn seal_with<C: AeadInPlace + AeadCore<NonceSize = U24>>(
    cipher: &C,
    nonce: &crypto_box::Nonce,
    plain: &[u8],
) -> Vec<u8> {
    let mut out = vec![0u8; TAG];
    out.extend_from_slice(plain);
    let tag = cipher
        .encrypt_in_place_detached(nonce, b"", &mut out[TAG..])
        .expect("no associated data and a small buffer: sealing cannot fail");
    out[..TAG].copy_from_slice(&tag);
    out
}

fn open(
    theirs: &PublicKey,
    ours: &SecretKey,
    nonce: &crypto_box::Nonce,
    boxed: &[u8],
    what: &'static str,
) -> Result<Vec<u8>, CurveError> {
    open_with(&SalsaBox::new(theirs, ours), nonce, boxed, what)
}

fn open_with<C: AeadInPlace + AeadCore<NonceSize = U24>>(
    cipher: &C,
    nonce: &crypto_box::Nonce,
    boxed: &[u8],
    what: &'static str,
) -> Result<Vec<u8>, CurveError> {
    let (tag, cipher_text) = boxed
        .split_at_checked(TAG)
        .ok_or(CurveError::BadBox(what))?;
    let mut plain = cipher_text.to_vec();
    cipher
        .decrypt_in_place_detached(nonce, b"", &mut plain, tag.into())
        .map_err(|_| CurveError::BadBox(what))?;
    Ok(plain)
}

fn key_at(bytes: &[u8], at: usize) -> PublicKey {
    let mut key = [0u8; KEY];
    key.copy_from_slice(&bytes[at..at + KEY]);
    PublicKey::from_bytes(key)
}

fn command_body<'a>(body: &'a [u8], name: &'static str) -> Result<&'a [u8], CurveError> {
    match codec::split_command(body) {
        Ok((found, data)) if found == name => Ok(data),
        _ => Err(CurveError::Unexpected { expected: name }),
    }
}

/// The server's side of one connection's handshake.
pub struct Server<'a> {
    keys: &'a Keypair,
    /// s': this connection's short-term secret.
    short: SecretKey,
    /// The key the cookie is sealed with, forgotten with the connection.
    cookie_key: crypto_secretbox::Key,
    /// C' and its last nonce, once HELLO has come.
    client_short: Option<(PublicKey, u64)>,
    cookie: Vec<u8>,
}

impl<'a> Server<'a> {
    pub fn new(keys: &'a Keypair) -> Self {
        Self {
            keys,
            short: SecretKey::generate(&mut OsRng),
            cookie_key: random::<KEY>().into(),
            client_short: None,
            cookie: Vec::new(),
        }
    }

    /// Reads HELLO (a whole command body) and answers WELCOME (a whole
    /// command frame). WELCOME is shorter than HELLO: no amplification.
    pub fn welcome(&mut self, hello: &[u8]) -> Result<Bytes, CurveError> {
        let data = command_body(hello, "HELLO")?;
        if hello.len() != HELLO_LEN || data[..2] != [1, 0] {
            return Err(CurveError::Unexpected { expected: "HELLO" });
        }
        let client_short = key_at(data, 74);
        let short_nonce = &data[106..114];
        let zeros = open(
            &client_short,
            &self.keys.secret,
            &nonce(b"CurveZMQHELLO---", short_nonce),
            &data[114..],
            "HELLO",
        )?;
        if zeros.iter().any(|&b| b != 0) {
            return Err(CurveError::BadBox("HELLO"));
        }
        let cookie_nonce = random::<16>();
        let mut cookie_plain = client_short.as_bytes().to_vec();
        cookie_plain.extend_from_slice(&self.short.to_bytes());
        let mut cookie = cookie_nonce.to_vec();
        cookie.extend(seal_with(
            &XSalsa20Poly1305::new(&self.cookie_key),
            &nonce(b"COOKIE--", &cookie_nonce),
            &cookie_plain,
        ));
        let mut plain = self.short.public_key().as_bytes().to_vec();
        plain.extend_from_slice(&cookie);
        let welcome_nonce = random::<16>();
        let mut data = welcome_nonce.to_vec();
        data.extend(seal(
            &client_short,
            &self.keys.secret,
            &nonce(b"WELCOME-", &welcome_nonce),
            &plain,
        ));
        debug_assert_eq!(data.len() + 8, WELCOME_LEN);
        self.client_short = Some((client_short, u64_at(short_nonce)));
        self.cookie = cookie;
        Ok(codec::command("WELCOME", &data))
    }

    /// Reads INITIATE: the cookie, the client's long-term key and its
    /// vouch, its properties. Answers READY (a whole command frame) with
    /// ours, and the session for the frames that follow.
    pub fn ready(
        &mut self,
        initiate: &[u8],
        socket_type: &str,
    ) -> Result<(PeerReady, Session, Bytes), CurveError> {
        let data = command_body(initiate, "INITIATE")?;
        let (client_short, hello_nonce) = self
            .client_short
            .clone()
            .ok_or(CurveError::Unexpected { expected: "HELLO" })?;
        if initiate.len() < INITIATE_MIN {
            return Err(CurveError::Unexpected {
                expected: "INITIATE",
            });
        }
        let (cookie, rest) = data.split_at(COOKIE_LEN);
        // This side keeps its state, so the cookie must simply be the one
        // WELCOME carried.
        if cookie != self.cookie.as_slice() {
            return Err(CurveError::BadCookie);
        }
        let short_nonce = u64_at(&rest[..8]);
        if short_nonce <= hello_nonce {
            return Err(CurveError::ReplayedNonce);
        }
        let plain = open(
            &client_short,
            &self.short,
            &nonce(b"CurveZMQINITIATE", &rest[..8]),
            &rest[8..],
            "INITIATE",
        )?;
        let client_long = key_at(&plain, 0);
        let vouch = open(
            &client_long,
            &self.short,
            &nonce(b"VOUCH---", &plain[KEY..KEY + 16]),
            &plain[KEY + 16..KEY + 16 + 2 * KEY + TAG],
            "vouch",
        )?;
        if vouch[..KEY] != client_short.as_bytes()[..]
            || vouch[KEY..] != self.keys.public.as_bytes()[..]
        {
            return Err(CurveError::BadVouch);
        }
        let peer = codec::parse_properties(&plain[KEY + 16 + 2 * KEY + TAG..])?;
        let mut session = Session::new(&client_short, &self.short, Side::Server, short_nonce);
        let ready = session.sealer.seal_command(
            "READY",
            b"CurveZMQREADY---",
            &codec::properties(socket_type),
        );
        Ok((peer, session, ready))
    }
}

/// The client's side of one connection's handshake.
pub struct Client {
    server: PublicKey,
    keys: Keypair,
    /// c': this connection's short-term secret.
    short: SecretKey,
    /// The server's short-term key, once WELCOME has come.
    server_short: Option<PublicKey>,
    nonce: u64,
}

impl Client {
    /// A client of the server whose long-term public key is `server`,
    /// proving itself with `keys`.
    pub fn new(server: PublicKey, keys: Keypair) -> Self {
        Self {
            server,
            keys,
            short: SecretKey::generate(&mut OsRng),
            server_short: None,
            nonce: 0,
        }
    }

    fn next_nonce(&mut self) -> [u8; 8] {
        self.nonce += 1;
        self.nonce.to_be_bytes()
    }

    /// Our HELLO (a whole command frame).
    pub fn hello(&mut self) -> Bytes {
        let short_nonce = self.next_nonce();
        let mut data = vec![1, 0];
        data.extend_from_slice(&[0; 72]);
        data.extend_from_slice(self.short.public_key().as_bytes());
        data.extend_from_slice(&short_nonce);
        data.extend(seal(
            &self.server,
            &self.short,
            &nonce(b"CurveZMQHELLO---", &short_nonce),
            &[0; 64],
        ));
        codec::command("HELLO", &data)
    }

    /// Reads WELCOME and answers INITIATE (a whole command frame) with our
    /// long-term key, its vouch and our properties.
    pub fn initiate(&mut self, welcome: &[u8], socket_type: &str) -> Result<Bytes, CurveError> {
        let data = command_body(welcome, "WELCOME")?;
        if welcome.len() != WELCOME_LEN {
            return Err(CurveError::Unexpected {
                expected: "WELCOME",
            });
        }
        let plain = open(
            &self.server,
            &self.short,
            &nonce(b"WELCOME-", &data[..16]),
            &data[16..],
            "WELCOME",
        )?;
        let server_short = key_at(&plain, 0);
        let cookie = &plain[KEY..];
        let vouch_nonce = random::<16>();
        let mut vouch_plain = self.short.public_key().as_bytes().to_vec();
        vouch_plain.extend_from_slice(self.server.as_bytes());
        let mut initiate_plain = self.keys.public.as_bytes().to_vec();
        initiate_plain.extend_from_slice(&vouch_nonce);
        initiate_plain.extend(seal(
            &server_short,
            &self.keys.secret,
            &nonce(b"VOUCH---", &vouch_nonce),
            &vouch_plain,
        ));
        initiate_plain.extend_from_slice(&codec::properties(socket_type));
        let short_nonce = self.next_nonce();
        let mut out = cookie.to_vec();
        out.extend_from_slice(&short_nonce);
        out.extend(seal(
            &server_short,
            &self.short,
            &nonce(b"CurveZMQINITIATE", &short_nonce),
            &initiate_plain,
        ));
        self.server_short = Some(server_short);
        Ok(codec::command("INITIATE", &out))
    }

    /// Reads READY: the server's properties, and the session for the
    /// frames that follow.
    pub fn ready(self, ready: &[u8]) -> Result<(PeerReady, Session), CurveError> {
        let server_short = self.server_short.ok_or(CurveError::Unexpected {
            expected: "WELCOME",
        })?;
        let data = command_body(ready, "READY")?;
        if data.len() < 8 + TAG {
            return Err(CurveError::Unexpected { expected: "READY" });
        }
        let mut session = Session::new(&server_short, &self.short, Side::Client, 0);
        session.sealer.nonce = self.nonce;
        let plain = session
            .opener
            .open_raw(b"CurveZMQREADY---", data, "READY")?;
        let peer = codec::parse_properties(&plain)?;
        Ok((peer, session))
    }
}

fn u64_at(bytes: &[u8]) -> u64 {
    let mut be = [0u8; 8];
    be.copy_from_slice(&bytes[..8]);
    u64::from_be_bytes(be)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

/// The two directions of an established connection.
pub struct Session {
    pub sealer: Sealer,
    pub opener: Opener,
}

impl Session {
    fn new(theirs: &PublicKey, ours: &SecretKey, side: Side, their_last_nonce: u64) -> Self {
        // Each direction has its own copy of the shared key.
        let cipher = || SalsaBox::new(theirs, ours);
        let (ours_prefix, theirs_prefix) = match side {
            Side::Client => (b"CurveZMQMESSAGEC", b"CurveZMQMESSAGES"),
            Side::Server => (b"CurveZMQMESSAGES", b"CurveZMQMESSAGEC"),
        };
        Self {
            sealer: Sealer {
                cipher: cipher(),
                prefix: ours_prefix,
                nonce: 0,
            },
            opener: Opener {
                cipher: cipher(),
                prefix: theirs_prefix,
                last_nonce: their_last_nonce,
            },
        }
    }
}

/// Boxes our frames: each a MESSAGE command with the next nonce.
pub struct Sealer {
    cipher: SalsaBox,
    prefix: &'static [u8; 16],
    nonce: u64,
}

impl Sealer {
    /// Appends to `out` the MESSAGE frame carrying `data` with `more` and
    /// `command` flags. Encrypts in place: one copy of the data.
    pub fn seal_frame(&mut self, out: &mut BytesMut, data: &[u8], more: bool, command: bool) {
        self.nonce += 1;
        let short_nonce = self.nonce.to_be_bytes();
        let body_len = 8 + 8 + TAG + 1 + data.len();
        // A plain frame, as libzmq sends it: its MESSAGE is read whatever
        // the flag, and older peers read no other.
        codec::put_frame_header(out, body_len, false, false);
        out.put_u8(7);
        out.put_slice(b"MESSAGE");
        out.put_slice(&short_nonce);
        let tag_at = out.len();
        out.put_slice(&[0; TAG]);
        let plain_at = out.len();
        out.put_u8(if more { FLAG_MORE } else { 0 } | if command { FLAG_COMMAND } else { 0 });
        out.put_slice(data);
        let tag = self
            .cipher
            .encrypt_in_place_detached(&nonce(self.prefix, &short_nonce), b"", &mut out[plain_at..])
            .expect("no associated data: sealing cannot fail");
        out[tag_at..plain_at].copy_from_slice(&tag);
    }

    /// A handshake command (READY) boxed with the next nonce.
    fn seal_command(&mut self, name: &str, prefix: &[u8; 16], plain: &[u8]) -> Bytes {
        self.nonce += 1;
        let short_nonce = self.nonce.to_be_bytes();
        let mut data = short_nonce.to_vec();
        data.extend(seal_with(&self.cipher, &nonce(prefix, &short_nonce), plain));
        codec::command(name, &data)
    }
}

/// A frame a MESSAGE carried.
#[derive(Debug, PartialEq, Eq)]
pub struct OpenedFrame {
    pub more: bool,
    pub command: bool,
    pub data: Bytes,
}

/// Opens the peer's frames, refusing a nonce that does not go up.
pub struct Opener {
    cipher: SalsaBox,
    prefix: &'static [u8; 16],
    last_nonce: u64,
}

impl Opener {
    /// Opens a MESSAGE command's whole body (name included), in place.
    pub fn open_frame(&mut self, mut body: BytesMut) -> Result<OpenedFrame, CurveError> {
        if body.len() < MESSAGE_OVERHEAD || &body[..8] != b"\x07MESSAGE" {
            return Err(CurveError::Unexpected {
                expected: "MESSAGE",
            });
        }
        let short_nonce = u64_at(&body[8..16]);
        if short_nonce <= self.last_nonce {
            return Err(CurveError::ReplayedNonce);
        }
        let tag = *crypto_box::Tag::from_slice(&body[16..16 + TAG]);
        let nonce = nonce(self.prefix, &body[8..16]);
        self.cipher
            .decrypt_in_place_detached(&nonce, b"", &mut body[16 + TAG..], &tag)
            .map_err(|_| CurveError::BadBox("MESSAGE"))?;
        self.last_nonce = short_nonce;
        let mut plain = body.split_off(16 + TAG);
        let flags = plain[0];
        let data = plain.split_off(1).freeze();
        Ok(OpenedFrame {
            more: flags & FLAG_MORE != 0,
            command: flags & FLAG_COMMAND != 0,
            data,
        })
    }

    /// Opens a handshake command's data: a short nonce, then a box.
    fn open_raw(
        &mut self,
        prefix: &[u8; 16],
        data: &[u8],
        what: &'static str,
    ) -> Result<Vec<u8>, CurveError> {
        let short_nonce = u64_at(&data[..8]);
        if short_nonce <= self.last_nonce {
            return Err(CurveError::ReplayedNonce);
        }
        let plain = open_with(&self.cipher, &nonce(prefix, &data[..8]), &data[8..], what)?;
        self.last_nonce = short_nonce;
        Ok(plain)
    }
}

#[cfg(test)]
mod tests;
