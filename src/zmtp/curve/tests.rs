use super::*;

/// The server pair in libzmq's CURVE documentation (`zmq_curve(7)`).
const PUBLIC: &str = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
const SECRET: &str = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6";

/// A frame's body: the bytes after its header.
fn body(frame: &[u8]) -> &[u8] {
    let header = codec::frame_header(frame[0]).unwrap();
    &frame[if header.long { 9 } else { 2 }..]
}

/// A handshake run to its end; the two sides' sessions and what each
/// learned of the other.
fn connect(server_keys: &Keypair) -> (Session, Session, PeerReady, PeerReady) {
    let mut server = Server::new(server_keys);
    let mut client = Client::new(server_keys.public().clone(), Keypair::generate());
    let welcome = server.welcome(body(&client.hello())).unwrap();
    let initiate = client.initiate(body(&welcome), "DEALER").unwrap();
    let (client_said, server_session, ready) = server.ready(body(&initiate), "ROUTER").unwrap();
    let (server_said, client_session) = client.ready(body(&ready)).unwrap();
    (server_session, client_session, client_said, server_said)
}

fn sealed(sealer: &mut Sealer, data: &[u8], more: bool) -> BytesMut {
    let mut out = BytesMut::new();
    sealer.seal_frame(&mut out, data, more, false);
    BytesMut::from(body(&out))
}

#[test]
fn the_documented_pair_reads_and_a_wrong_half_does_not() {
    let keys = Keypair::from_z85(PUBLIC, SECRET).unwrap();
    assert_eq!(keys.public_z85(), PUBLIC);
    assert_eq!(keys.secret_z85(), SECRET);
    assert!(
        !format!("{keys:?}").contains(SECRET),
        "Debug shows no secret"
    );
    let other = Keypair::generate();
    assert_eq!(
        Keypair::from_z85(&other.public_z85(), SECRET).unwrap_err(),
        KeyError::Mismatch
    );
    assert_eq!(
        Keypair::from_z85("short", SECRET).unwrap_err(),
        KeyError::NotZ85("curve_publickey")
    );
}

#[test]
fn a_connection_file_has_both_keys_or_none() {
    let json = serde_json::json!({"curve_publickey": PUBLIC, "curve_secretkey": SECRET});
    let keys = Keypair::from_connection_file(&json).unwrap().unwrap();
    assert_eq!(keys.public_z85(), PUBLIC);
    assert!(
        Keypair::from_connection_file(&serde_json::json!({"key": "x"}))
            .unwrap()
            .is_none()
    );
    assert_eq!(
        Keypair::from_connection_file(&serde_json::json!({"curve_publickey": PUBLIC})).unwrap_err(),
        KeyError::Half("curve_publickey", "curve_secretkey")
    );
}

#[test]
fn both_sides_agree_and_frames_cross_in_both_directions() {
    let keys = Keypair::generate();
    let (mut server, mut client, client_said, server_said) = connect(&keys);
    assert_eq!(client_said.socket_type, "DEALER");
    assert_eq!(server_said.socket_type, "ROUTER");

    let frame = client
        .opener
        .open_frame(sealed(&mut server.sealer, b"to the client", true))
        .unwrap();
    assert_eq!(frame.data, Bytes::from_static(b"to the client"));
    assert!(frame.more && !frame.command);

    let mut out = BytesMut::new();
    client
        .sealer
        .seal_frame(&mut out, b"\x04PING\x00\x01", false, true);
    let frame = server
        .opener
        .open_frame(BytesMut::from(body(&out)))
        .unwrap();
    assert!(frame.command && !frame.more);
    assert_eq!(&frame.data[..], b"\x04PING\x00\x01");

    // A large frame takes the 8-byte size form and still opens.
    let big = vec![7u8; 300_000];
    let frame = server
        .opener
        .open_frame(sealed(&mut client.sealer, &big, false))
        .unwrap();
    assert_eq!(frame.data.len(), big.len());
}

#[test]
fn a_client_without_the_servers_key_gets_no_welcome() {
    let keys = Keypair::generate();
    let mut server = Server::new(&keys);
    let mut stranger = Client::new(Keypair::generate().public().clone(), Keypair::generate());
    assert_eq!(
        server.welcome(body(&stranger.hello())).unwrap_err(),
        CurveError::BadBox("HELLO")
    );
    // Nor does anything that is not a HELLO of the right size.
    assert!(
        server
            .welcome(&codec::command_body("HELLO", &[0; 10]))
            .is_err()
    );
    assert!(server.welcome(&codec::command_body("READY", &[])).is_err());
}

#[test]
fn a_tampered_or_replayed_frame_is_refused() {
    let keys = Keypair::generate();
    let (mut server, mut client, ..) = connect(&keys);
    let mut frame = sealed(&mut client.sealer, b"run this", false);
    let last = frame.len() - 1;
    frame[last] ^= 1;
    assert_eq!(
        server.opener.open_frame(frame).unwrap_err(),
        CurveError::BadBox("MESSAGE")
    );

    let frame = sealed(&mut client.sealer, b"run this", false);
    server.opener.open_frame(frame.clone()).unwrap();
    assert_eq!(
        server.opener.open_frame(frame).unwrap_err(),
        CurveError::ReplayedNonce
    );
    // A frame sealed for the other direction does not open here.
    let own = sealed(&mut server.sealer, b"mine", false);
    assert!(server.opener.open_frame(own).is_err());
}

#[test]
fn an_initiate_from_another_connection_is_refused() {
    let keys = Keypair::generate();
    let mut first = Server::new(&keys);
    let mut client = Client::new(keys.public().clone(), Keypair::generate());
    let welcome = first.welcome(body(&client.hello())).unwrap();
    let initiate = client.initiate(body(&welcome), "DEALER").unwrap();

    // The same HELLO and INITIATE replayed to a new connection.
    let mut replayer = Client::new(keys.public().clone(), Keypair::generate());
    let mut second = Server::new(&keys);
    second.welcome(body(&replayer.hello())).unwrap();
    assert!(matches!(
        second.ready(body(&initiate), "ROUTER"),
        Err(CurveError::BadCookie)
    ));
    // INITIATE before HELLO.
    assert!(Server::new(&keys).ready(body(&initiate), "ROUTER").is_err());
}

#[test]
fn a_truncated_initiate_is_an_error_not_a_panic() {
    let keys = Keypair::generate();
    let mut server = Server::new(&keys);
    let mut client = Client::new(keys.public().clone(), Keypair::generate());
    let welcome = server.welcome(body(&client.hello())).unwrap();
    let initiate = client.initiate(body(&welcome), "DEALER").unwrap();
    let initiate = body(&initiate);
    for cut in [9, 100, 200, initiate.len() - 1] {
        let mut server = Server::new(&keys);
        let mut client = Client::new(keys.public().clone(), Keypair::generate());
        let welcome = server.welcome(body(&client.hello())).unwrap();
        client.initiate(body(&welcome), "DEALER").unwrap();
        assert!(
            server.ready(&initiate[..cut], "ROUTER").is_err(),
            "cut at {cut}"
        );
    }
}

#[test]
fn a_short_or_foreign_message_is_an_error_not_a_panic() {
    let keys = Keypair::generate();
    let (mut server, ..) = connect(&keys);
    for bytes in [
        &b""[..],
        b"\x07MESSAGE",
        b"\x07MESSAGE\x00\x00\x00\x00\x00\x00\x00\x09",
        b"\x04PING\x00\x00",
    ] {
        assert!(server.opener.open_frame(BytesMut::from(bytes)).is_err());
    }
}
