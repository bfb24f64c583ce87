//! ZMTP 3.0's bytes: the greeting, frame headers, the READY command and
//! properties (RFC 23; CURVE's own commands are in `curve`). Pure
//! functions of bytes, so every rule about what a peer may send is checked
//! here, in one place, without sockets.

use bytes::{BufMut, Bytes, BytesMut};

/// The greeting is always 64 bytes.
pub const GREETING_LEN: usize = 64;
/// The signature at the start of every ZMTP greeting (1.0 to 3.x).
pub const SIGNATURE_LEN: usize = 10;

const FLAG_MORE: u8 = 0x01;
const FLAG_LONG: u8 = 0x02;
const FLAG_COMMAND: u8 = 0x04;

/// Why a peer's bytes were refused; the connection is then closed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("not a ZMTP greeting")]
    NotZmtp,
    #[error("ZMTP {0}.x is not supported (3.0 or later is needed)")]
    OldVersion(u8),
    #[error("the peer's security mechanism is {0:?}, not this socket's")]
    Mechanism(String),
    #[error("frame flags {0:#04x} have reserved bits set")]
    ReservedFlags(u8),
    #[error("expected a READY command, got {0:?}")]
    NotReady(String),
    #[error("malformed command")]
    BadCommand,
    #[error("a {theirs} peer cannot talk to a {ours} socket")]
    IncompatibleSocket { ours: &'static str, theirs: String },
}

/// Our greeting: ZMTP 3.0 with `mechanism` (`NULL` or `CURVE`), as the
/// mechanism's server or not. Announcing 3.0 keeps newer peers on 3.0's
/// framing (subscriptions as plain messages).
pub fn greeting(mechanism: &[u8], as_server: bool) -> [u8; GREETING_LEN] {
    let mut g = [0u8; GREETING_LEN];
    g[0] = 0xFF;
    g[9] = 0x7F;
    g[10] = 3;
    g[11] = 0;
    g[12..12 + mechanism.len()].copy_from_slice(mechanism);
    g[32] = u8::from(as_server);
    g
}

/// Checks the first [`SIGNATURE_LEN`] bytes of a peer's greeting.
pub fn check_signature(signature: &[u8]) -> Result<(), ProtocolError> {
    match signature {
        [0xFF, .., last] if signature.len() == SIGNATURE_LEN && last & 1 == 1 => Ok(()),
        _ => Err(ProtocolError::NotZmtp),
    }
}

/// Checks the rest of a peer's greeting (the bytes after the signature):
/// ZMTP 3 or later, with the `mechanism` we speak.
pub fn check_greeting_rest(rest: &[u8], mechanism: &[u8]) -> Result<(), ProtocolError> {
    let major = rest.first().copied().ok_or(ProtocolError::NotZmtp)?;
    if major < 3 {
        return Err(ProtocolError::OldVersion(major));
    }
    let theirs = rest.get(2..22).ok_or(ProtocolError::NotZmtp)?;
    let name = theirs.split(|&b| b == 0).next().unwrap_or_default();
    if name != mechanism {
        return Err(ProtocolError::Mechanism(
            String::from_utf8_lossy(name).into_owned(),
        ));
    }
    Ok(())
}

/// What a frame header says of the frame that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub more: bool,
    pub command: bool,
    /// True when the size is the 8-byte form.
    pub long: bool,
}

/// Reads a frame's flags byte.
pub fn frame_header(flags: u8) -> Result<FrameHeader, ProtocolError> {
    if flags & !(FLAG_MORE | FLAG_LONG | FLAG_COMMAND) != 0 {
        return Err(ProtocolError::ReservedFlags(flags));
    }
    Ok(FrameHeader {
        more: flags & FLAG_MORE != 0,
        command: flags & FLAG_COMMAND != 0,
        long: flags & FLAG_LONG != 0,
    })
}

/// Appends the header of a frame of `len` bytes to `out`.
pub fn put_frame_header(out: &mut BytesMut, len: usize, more: bool, command: bool) {
    let mut flags = 0;
    if more {
        flags |= FLAG_MORE;
    }
    if command {
        flags |= FLAG_COMMAND;
    }
    match u8::try_from(len) {
        Ok(short) => {
            out.put_u8(flags);
            out.put_u8(short);
        }
        Err(_) => {
            out.put_u8(flags | FLAG_LONG);
            out.put_u64(len as u64);
        }
    }
}

/// A whole command frame (header and body): `name` then `data`.
pub fn command(name: &str, data: &[u8]) -> Bytes {
    let body = command_body(name, data);
    let mut out = BytesMut::with_capacity(body.len() + 9);
    put_frame_header(&mut out, body.len(), false, true);
    out.put_slice(&body);
    out.freeze()
}

/// A command's body without its frame header: `name` then `data`.
pub fn command_body(name: &str, data: &[u8]) -> Bytes {
    let mut body = BytesMut::with_capacity(1 + name.len() + data.len());
    body.put_u8(name.len() as u8);
    body.put_slice(name.as_bytes());
    body.put_slice(data);
    body.freeze()
}

/// The PONG that answers a ZMTP 3.1 PING's body (TTL, then a context of
/// up to 16 bytes to send back); `None` for any other command.
pub fn pong_for(body: &[u8]) -> Option<Bytes> {
    match split_command(body) {
        Ok(("PING", data)) if data.len() >= 2 => {
            let context = &data[2..];
            Some(command_body("PONG", &context[..context.len().min(16)]))
        }
        _ => None,
    }
}

/// Our READY command, naming our socket type.
pub fn ready(socket_type: &str) -> Bytes {
    command("READY", &properties(socket_type))
}

/// Our properties (READY's data, or the metadata CURVE boxes).
pub fn properties(socket_type: &str) -> BytesMut {
    let mut properties = BytesMut::new();
    put_property(&mut properties, "Socket-Type", socket_type.as_bytes());
    properties
}

fn put_property(out: &mut BytesMut, name: &str, value: &[u8]) {
    out.put_u8(name.len() as u8);
    out.put_slice(name.as_bytes());
    out.put_u32(value.len() as u32);
    out.put_slice(value);
}

/// Splits a command body into its name and data.
pub fn split_command(body: &[u8]) -> Result<(&str, &[u8]), ProtocolError> {
    let (&len, rest) = body.split_first().ok_or(ProtocolError::BadCommand)?;
    let len = usize::from(len);
    if rest.len() < len {
        return Err(ProtocolError::BadCommand);
    }
    let name = std::str::from_utf8(&rest[..len]).map_err(|_| ProtocolError::BadCommand)?;
    Ok((name, &rest[len..]))
}

/// What a peer's READY command says about it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PeerReady {
    pub socket_type: String,
    /// The routing identity it asks for; empty when it names none.
    pub identity: Bytes,
}

/// Reads a READY command's body.
pub fn parse_ready(body: &[u8]) -> Result<PeerReady, ProtocolError> {
    let (name, data) = split_command(body)?;
    if name != "READY" {
        return Err(ProtocolError::NotReady(name.to_owned()));
    }
    parse_properties(data)
}

/// Reads a list of properties (READY's data, or the metadata in CURVE's
/// INITIATE and READY boxes).
pub fn parse_properties(mut data: &[u8]) -> Result<PeerReady, ProtocolError> {
    let mut ready = PeerReady::default();
    while let Some((&len, rest)) = data.split_first() {
        let len = usize::from(len);
        let key = rest.get(..len).ok_or(ProtocolError::BadCommand)?;
        let size = rest.get(len..len + 4).ok_or(ProtocolError::BadCommand)?;
        let size = u32::from_be_bytes([size[0], size[1], size[2], size[3]]) as usize;
        let value = rest
            .get(len + 4..len + 4 + size)
            .ok_or(ProtocolError::BadCommand)?;
        // Property names are case-insensitive.
        if key.eq_ignore_ascii_case(b"Socket-Type") {
            ready.socket_type = String::from_utf8_lossy(value).into_owned();
        } else if key.eq_ignore_ascii_case(b"Identity") {
            ready.identity = Bytes::copy_from_slice(value);
        }
        data = &rest[len + 4 + size..];
    }
    Ok(ready)
}

/// Whether a `theirs` peer may talk to our `ours` socket (RFC 28/29's pairs).
pub fn compatible(ours: &'static str, theirs: &str) -> Result<(), ProtocolError> {
    let ok = match ours {
        "ROUTER" => matches!(theirs, "DEALER" | "REQ" | "ROUTER"),
        "XPUB" => matches!(theirs, "SUB" | "XSUB"),
        "REP" => matches!(theirs, "REQ" | "DEALER"),
        "DEALER" => matches!(theirs, "ROUTER" | "REP" | "DEALER"),
        "SUB" => matches!(theirs, "PUB" | "XPUB"),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(ProtocolError::IncompatibleSocket {
            ours,
            theirs: theirs.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_greeting_is_zmtp_3_0_null() {
        let g = greeting(b"NULL", false);
        check_signature(&g[..SIGNATURE_LEN]).unwrap();
        check_greeting_rest(&g[SIGNATURE_LEN..], b"NULL").unwrap();
        assert_eq!(&g[10..12], &[3, 0]);
        assert_eq!(g[32], 0, "not as-server");
    }

    #[test]
    fn greetings_we_cannot_speak_are_refused() {
        assert_eq!(check_signature(b"GET / HTTP"), Err(ProtocolError::NotZmtp));
        let mut g = greeting(b"NULL", false);
        g[10] = 2;
        assert_eq!(
            check_greeting_rest(&g[SIGNATURE_LEN..], b"NULL"),
            Err(ProtocolError::OldVersion(2))
        );
        let g = greeting(b"CURVE", true);
        assert_eq!(g[32], 1, "as-server");
        assert_eq!(
            check_greeting_rest(&g[SIGNATURE_LEN..], b"NULL"),
            Err(ProtocolError::Mechanism("CURVE".into()))
        );
        let g = greeting(b"NULL", false);
        assert_eq!(
            check_greeting_rest(&g[SIGNATURE_LEN..], b"CURVE"),
            Err(ProtocolError::Mechanism("NULL".into()))
        );
        assert_eq!(
            check_greeting_rest(&[3], b"NULL"),
            Err(ProtocolError::NotZmtp)
        );
    }

    #[test]
    fn frame_headers_round_trip_in_both_sizes() {
        let mut out = BytesMut::new();
        put_frame_header(&mut out, 5, true, false);
        assert_eq!(&out[..], &[FLAG_MORE, 5]);
        let mut out = BytesMut::new();
        put_frame_header(&mut out, 300, false, false);
        assert_eq!(out[0], FLAG_LONG);
        assert_eq!(u64::from_be_bytes(out[1..9].try_into().unwrap()), 300);
        let header = frame_header(FLAG_LONG | FLAG_MORE).unwrap();
        assert!(header.long && header.more && !header.command);
        assert_eq!(frame_header(0x80), Err(ProtocolError::ReservedFlags(0x80)));
    }

    #[test]
    fn ready_round_trips_and_reads_an_identity() {
        let ours = ready("ROUTER");
        // Skip the two header bytes of a short command frame.
        let parsed = parse_ready(&ours[2..]).unwrap();
        assert_eq!(parsed.socket_type, "ROUTER");
        assert!(parsed.identity.is_empty());

        let mut props = BytesMut::new();
        put_property(&mut props, "socket-type", b"DEALER");
        put_property(&mut props, "Identity", b"client-1");
        let frame = command("READY", &props);
        let parsed = parse_ready(&frame[2..]).unwrap();
        assert_eq!(parsed.socket_type, "DEALER");
        assert_eq!(parsed.identity, Bytes::from_static(b"client-1"));
    }

    #[test]
    fn malformed_commands_are_errors_not_panics() {
        assert_eq!(parse_ready(&[]), Err(ProtocolError::BadCommand));
        assert_eq!(parse_ready(&[9, b'R']), Err(ProtocolError::BadCommand));
        let frame = command("PING", b"");
        assert_eq!(
            parse_ready(&frame[2..]),
            Err(ProtocolError::NotReady("PING".into()))
        );
        // A property whose size runs past the end.
        let mut body = vec![5];
        body.extend_from_slice(b"READY");
        body.extend_from_slice(&[1, b'x', 0xFF, 0xFF, 0xFF, 0xFF]);
        assert_eq!(parse_ready(&body), Err(ProtocolError::BadCommand));
    }

    #[test]
    fn a_ping_is_answered_with_its_context() {
        let ping = command_body("PING", b"\x00\x0actx");
        assert_eq!(pong_for(&ping).unwrap(), command_body("PONG", b"ctx"));
        assert_eq!(pong_for(&command_body("PING", b"\x00")), None, "no TTL");
        assert_eq!(pong_for(&command_body("PONG", b"\x00\x01")), None);
        let long = command_body("PING", &[7u8; 40]);
        assert_eq!(pong_for(&long).unwrap().len(), 1 + 4 + 16);
    }

    #[test]
    fn only_matching_socket_types_may_connect() {
        compatible("ROUTER", "DEALER").unwrap();
        compatible("XPUB", "SUB").unwrap();
        compatible("REP", "REQ").unwrap();
        assert!(compatible("XPUB", "DEALER").is_err());
        assert!(compatible("ROUTER", "PUB").is_err());
        compatible("DEALER", "ROUTER").unwrap();
        compatible("SUB", "XPUB").unwrap();
        assert!(compatible("SUB", "ROUTER").is_err());
    }
}
