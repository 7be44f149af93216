//! The codec alone: every frame kind round-trips, and every malformed frame is refused
//! naming its frame number and field.

use tranche_feed::*;
use tranche_feed_tcp::frame::{self, Frame, Kind, EVENT_BYTES, LEN_BYTES, ORDER_BYTES};
use tranche_feed_tcp::{
    Access, Ack, ErrorCode, FrameError, ReadHeader, ReadRequest, ServerError, Welcome,
    MAX_BATCH_EVENTS, MAX_FRAME_LEN,
};
use tranche_feed_tcp::{Follow, ReplicateHead, VectorHeader, VectorRead};

fn insert(seq: u64) -> Event {
    Event::Insert(NewOrder {
        seq,
        rec: seq + 1_000,
        id: OrderId(u64::MAX - seq),
        firm: FirmId(7),
        broker: BrokerId(70),
        instrument: InstrumentId(u32::MAX),
        side: Side::Sell,
        price: -12_345,
        quantity: MAX_QUANTITY,
        created_at: 1_700_000_000_000_000_000 + seq,
    })
}

fn change(seq: u64) -> Event {
    Event::Change(OrderChange {
        seq,
        id: OrderId(9),
        price: MAX_PRICE,
        quantity: 10,
        filled: 4,
        status: Status::PartiallyFilled,
        updated_at: u64::MAX,
    })
}

fn order(seq: u64) -> Order {
    Order {
        id: OrderId(seq * 3),
        firm: FirmId(1),
        broker: BrokerId(2),
        instrument: InstrumentId(3),
        side: Side::Buy,
        price: -1,
        quantity: 500,
        filled: 200,
        status: Status::Expired,
        created_at: 11,
        updated_at: 12,
        seq,
        rec: seq + 5,
    }
}

/// The one whole frame in `bytes`, split and decoded as frame number `number`.
fn decode_one(number: u64, bytes: &[u8]) -> Result<Frame<'_>, FrameError> {
    let (kind, body, total) =
        frame::split_frame(number, bytes, MAX_FRAME_LEN)?.expect("a whole frame");
    assert_eq!(total, bytes.len(), "exactly one frame");
    frame::decode(number, kind, body)
}

/// A frame of `kind` with `body`, length prefix included.
fn raw(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = ((body.len() + 1) as u32).to_le_bytes().to_vec();
    out.push(kind);
    out.extend_from_slice(body);
    out
}

/// The error decoding `bytes` as frame `number` gives, checked to name `field`.
fn refused(number: u64, bytes: &[u8], field: &str) -> FrameError {
    let error = decode_one(number, bytes).expect_err("a malformed frame");
    assert_eq!(error.frame, number, "{error}");
    assert_eq!(error.field, field, "{error}");
    error
}

#[test]
fn every_kind_round_trips() {
    let mut out = Vec::new();
    frame::encode_hello(b"core-secret", &mut out);
    match decode_one(1, &out).unwrap() {
        Frame::Hello(hello) => assert_eq!(hello.token, b"core-secret"),
        other => panic!("{other:?}"),
    }
    // Its Debug keeps the token out of logs.
    let Frame::Hello(hello) = decode_one(1, &out).unwrap() else {
        unreachable!()
    };
    assert!(!format!("{hello:?}").contains("secret"));

    let events = [insert(1), change(2), insert(3)];
    out.clear();
    frame::encode_batch(42, &events, &mut out);
    assert_eq!(out.len(), LEN_BYTES + 1 + 16 + 3 * EVENT_BYTES);
    let Frame::Batch(batch) = decode_one(2, &out).unwrap() else {
        panic!("not a batch")
    };
    assert_eq!((batch.batch, batch.count), (42, 3));
    let mut decoded = vec![insert(99)];
    batch.decode_into(&mut decoded).unwrap();
    assert_eq!(decoded[1..], events, "appended after what was there");

    for filter in [
        Filter::All,
        Filter::Firm(FirmId(4)),
        Filter::Broker(BrokerId(u32::MAX)),
        Filter::Instrument(InstrumentId(0)),
    ] {
        let read = ReadRequest {
            cursor: Cursor::new(5, 6).to_bytes(),
            filter,
            limit: 100,
            min_batch: 7,
            wait_ms: 250,
            linger_us: 65_535,
        };
        out.clear();
        frame::encode_read(9, &read, &mut out);
        assert_eq!(
            decode_one(3, &out).unwrap(),
            Frame::Read { request: 9, read }
        );
    }

    for access in [
        Access::Open,
        Access::Core,
        Access::Firm(FirmId(12)),
        Access::Reader,
    ] {
        let welcome = Welcome {
            version: frame::VERSION,
            access,
            marks: (10, 20),
            max_batch_events: MAX_BATCH_EVENTS,
        };
        out.clear();
        frame::encode_welcome(&welcome, &mut out);
        assert_eq!(decode_one(1, &out).unwrap(), Frame::Welcome(welcome));
    }

    let ack = Ack {
        batch: 3,
        events: 1_000,
        position: Cursor::new(u64::MAX, 1),
    };
    out.clear();
    frame::encode_ack(&ack, &mut out);
    assert_eq!(decode_one(2, &out).unwrap(), Frame::Ack(ack));

    for oldest in [None, Some(1_700_000_000_000_000_000)] {
        let header = ReadHeader {
            request: 8,
            next: Cursor::new(100, 50),
            count: 2,
            oldest_created_at: oldest,
            server_wait_us: 1_234,
            server_read_us: 56,
        };
        out.clear();
        frame::encode_header(&header, &mut out);
        assert_eq!(decode_one(2, &out).unwrap(), Frame::Header(header));
    }

    let orders = [order(1), order(2)];
    out.clear();
    frame::encode_orders(&orders, &mut out);
    assert_eq!(out.len(), LEN_BYTES + 1 + 2 * ORDER_BYTES);
    let Frame::Orders(body) = decode_one(3, &out).unwrap() else {
        panic!("not orders")
    };
    assert_eq!(body.len(), 2);
    let mut decoded = Vec::new();
    body.decode_into(&mut decoded).unwrap();
    assert_eq!(decoded, orders);
    out.clear();
    frame::encode_orders(&[], &mut out);
    let Frame::Orders(body) = decode_one(3, &out).unwrap() else {
        panic!("not orders")
    };
    assert!(body.is_empty());

    for error in [
        ServerError {
            code: ErrorCode::CursorTooOld,
            frame: 4,
            id: 3,
            index: None,
            oldest: Some(Cursor::new(2, 1).into()),
            field: "cursor".into(),
            message: "too old — résumé from the oldest".into(),
        },
        ServerError {
            code: ErrorCode::Refused,
            frame: 9,
            id: 8,
            index: Some(0),
            oldest: None,
            field: "events[0].seq".into(),
            message: "expected more than 4, got 3".into(),
        },
        ServerError {
            code: ErrorCode::ShuttingDown,
            frame: 0,
            id: 0,
            index: None,
            oldest: None,
            field: String::new(),
            message: String::new(),
        },
    ] {
        out.clear();
        frame::encode_error(&error, &mut out);
        assert_eq!(decode_one(5, &out).unwrap(), Frame::Error(error));
    }
}

#[test]
fn kinds_and_codes_match_their_bytes() {
    for code in 0..=u8::MAX {
        if let Some(kind) = Kind::from_code(code) {
            assert_eq!(kind.code(), code);
            assert_eq!(kind.from_client(), code < 0x80, "{kind}");
        }
        if let Some(error) = ErrorCode::from_code(code) {
            assert_eq!(error.code(), code);
        }
    }
    let closing: Vec<_> = (1..=9)
        .filter_map(ErrorCode::from_code)
        .filter(|c| c.closes())
        .map(|c| c.name())
        .collect();
    assert_eq!(
        closing,
        [
            "malformed",
            "unauthorized",
            "forbidden",
            "store_failed",
            "shutting_down"
        ]
    );
}

#[test]
fn lengths_out_of_bounds_are_refused_before_the_body_is_read() {
    let error = frame::split_frame(4, &0u32.to_le_bytes(), MAX_FRAME_LEN).unwrap_err();
    assert_eq!((error.frame, error.field.as_str()), (4, "length"));
    assert!(error.problem.contains("got 0"), "{error}");

    // Only the length is there: too large is known already.
    let too_large = (MAX_FRAME_LEN + 1).to_le_bytes();
    let error = frame::split_frame(7, &too_large, MAX_FRAME_LEN).unwrap_err();
    assert_eq!(error.field, "length");
    assert_eq!(
        error.to_string(),
        format!(
            "frame 7, field length: expected at most {MAX_FRAME_LEN} bytes, got {}",
            MAX_FRAME_LEN + 1
        )
    );

    // Not whole yet: wait for more.
    let mut out = Vec::new();
    frame::encode_batch(1, &[insert(1)], &mut out);
    for cut in 0..out.len() {
        assert_eq!(
            frame::split_frame(1, &out[..cut], MAX_FRAME_LEN).unwrap(),
            None
        );
    }
    // Two frames back to back: the first is split off.
    let whole = out.len();
    frame::encode_ack(
        &Ack {
            batch: 1,
            events: 1,
            position: Cursor::new(1, 1),
        },
        &mut out,
    );
    let (kind, _, total) = frame::split_frame(1, &out, MAX_FRAME_LEN).unwrap().unwrap();
    assert_eq!((kind, total), (Kind::Batch.code(), whole));
}

#[test]
fn an_unknown_kind_is_named() {
    let error = refused(3, &raw(0x7e, &[0; 8]), "kind");
    assert!(
        error
            .to_string()
            .starts_with("frame 3 (kind 0x7e), field kind: expected a frame kind"),
        "{error}"
    );
}

#[test]
fn malformed_hellos() {
    let mut good = Vec::new();
    frame::encode_hello(b"tok", &mut good);
    let body = &good[LEN_BYTES + 1..];

    let mut bad = body.to_vec();
    bad[..4].copy_from_slice(b"HTTP");
    let error = refused(1, &raw(1, &bad), "magic");
    assert!(error.problem.contains("\"TRFD\""), "{error}");

    let mut bad = body.to_vec();
    bad[4] = 2;
    let error = refused(1, &raw(1, &bad), "version");
    assert_eq!(error.problem, "expected 1, got 2");

    // What was reserved names a core's shard.
    let mut shard = Vec::new();
    frame::encode_hello_shard(b"tok", 3, &mut shard);
    assert_eq!(&shard[..LEN_BYTES + 7], &good[..LEN_BYTES + 7]);
    match decode_one(1, &shard).unwrap() {
        Frame::Hello(hello) => assert_eq!((hello.token, hello.shard), (&b"tok"[..], 3)),
        other => panic!("expected a HELLO, got {other:?}"),
    }

    let mut bad = body.to_vec();
    bad[8..10].copy_from_slice(&1_025u16.to_le_bytes());
    refused(1, &raw(1, &bad), "token_len");

    // Says 3 token bytes, carries 2.
    refused(1, &raw(1, &body[..body.len() - 1]), "length");
    // Shorter than the fixed head.
    refused(1, &raw(1, &body[..9]), "length");
}

#[test]
fn malformed_batches() {
    let mut good = Vec::new();
    frame::encode_batch(5, &[insert(1), change(2)], &mut good);
    let body = good[LEN_BYTES + 1..].to_vec();
    let events_at = 16;

    refused(2, &raw(2, &body[..15]), "length");

    let mut bad = body.clone();
    bad[8..12].copy_from_slice(&(MAX_BATCH_EVENTS + 1).to_le_bytes());
    let error = refused(2, &raw(2, &bad), "count");
    assert_eq!(
        error.problem,
        format!(
            "expected at most {MAX_BATCH_EVENTS} events, got {}",
            MAX_BATCH_EVENTS + 1
        )
    );

    // Says 3 events, carries 2; says 2, carries a byte more.
    let mut bad = body.clone();
    bad[8] = 3;
    refused(2, &raw(2, &bad), "length");
    let mut bad = body.clone();
    bad.push(0);
    refused(2, &raw(2, &bad), "length");

    let mut bad = body.clone();
    bad[12] = 1;
    refused(2, &raw(2, &bad), "reserved");

    // Event-level damage is found when the events are decoded.
    let event_error = |patch: &dyn Fn(&mut [u8]), field: &str| {
        let mut bad = body.clone();
        patch(&mut bad[events_at..]);
        let bytes = raw(2, &bad);
        let Frame::Batch(batch) = decode_one(6, &bytes).unwrap() else {
            panic!("not a batch")
        };
        let error = batch.decode_into(&mut Vec::new()).unwrap_err();
        assert_eq!((error.frame, error.field.as_str()), (6, field), "{error}");
        assert_eq!(error.kind, Some(Kind::Batch.code()));
        error
    };
    let error = event_error(&|e| e[1] = 9, "events[0].side");
    assert_eq!(
        error.to_string(),
        "frame 6 (BATCH), field events[0].side: expected 1 (buy) or 2 (sell), got 9"
    );
    event_error(&|e| e[1] = 0, "events[0].side");
    event_error(&|e| e[EVENT_BYTES + 1] = 8, "events[1].status");
    event_error(&|e| e[EVENT_BYTES + 1] = 0, "events[1].status");
    event_error(&|e| e[EVENT_BYTES] = 3, "events[1].type");
    event_error(&|e| e[0] = 0, "events[0].type");
    event_error(&|e| e[3] = 1, "events[0].reserved");
    event_error(&|e| e[EVENT_BYTES + 4] = 1, "events[1].firm");
    event_error(&|e| e[EVENT_BYTES + 8] = 1, "events[1].broker");
    event_error(&|e| e[EVENT_BYTES + 12] = 1, "events[1].instrument");
}

#[test]
fn malformed_reads() {
    let read = ReadRequest::new(Cursor::START, Filter::Firm(FirmId(3)));
    let mut good = Vec::new();
    frame::encode_read(1, &read, &mut good);
    let body = good[LEN_BYTES + 1..].to_vec();

    refused(2, &raw(3, &body[..47]), "length");
    let mut bad = body.clone();
    bad[29] = 4;
    let error = refused(2, &raw(3, &bad), "filter");
    assert!(error.problem.ends_with("got 4"), "{error}");
    let mut bad = body.clone();
    bad[29] = 0;
    refused(2, &raw(3, &bad), "key");
    let mut bad = body.clone();
    bad[36..40].copy_from_slice(&0u32.to_le_bytes());
    refused(2, &raw(3, &bad), "limit");
    // What was reserved is the linger, in microseconds.
    let mut lingering = body.clone();
    lingering[30..32].copy_from_slice(&700u16.to_le_bytes());
    match decode_one(2, &raw(3, &lingering)).unwrap() {
        Frame::Read { read, .. } => assert_eq!(read.linger_us, 700),
        other => panic!("expected a READ, got {other:?}"),
    }
    // The cursor is not the codec's to judge: the server answers it as HTTP does.
    let mut forged = body.clone();
    forged[12] ^= 1;
    assert!(decode_one(2, &raw(3, &forged)).is_ok());
}

#[test]
fn malformed_server_frames() {
    let mut out = Vec::new();
    frame::encode_welcome(
        &Welcome {
            version: 1,
            access: Access::Core,
            marks: (0, 0),
            max_batch_events: 1,
        },
        &mut out,
    );
    let welcome = out[LEN_BYTES + 1..].to_vec();
    let mut bad = welcome.clone();
    bad[2] = 9;
    refused(1, &raw(0x81, &bad), "access");
    let mut bad = welcome.clone();
    bad[4] = 1;
    refused(1, &raw(0x81, &bad), "firm");
    let mut bad = welcome.clone();
    bad[0] = 2;
    refused(1, &raw(0x81, &bad), "version");

    out.clear();
    frame::encode_ack(
        &Ack {
            batch: 1,
            events: 1,
            position: Cursor::new(1, 1),
        },
        &mut out,
    );
    let ack = out[LEN_BYTES + 1..].to_vec();
    refused(2, &raw(0x82, &ack[..31]), "length");
    let mut bad = ack.clone();
    bad[13] = 1;
    refused(2, &raw(0x82, &bad), "reserved");

    out.clear();
    frame::encode_header(
        &ReadHeader {
            request: 1,
            next: Cursor::new(1, 1),
            count: 0,
            oldest_created_at: None,
            server_wait_us: 0,
            server_read_us: 0,
        },
        &mut out,
    );
    let mut bad = out[LEN_BYTES + 1..].to_vec();
    bad[20] ^= 0xff;
    let error = refused(2, &raw(0x83, &bad), "next");
    assert!(error.problem.contains("checksum"), "{error}");

    out.clear();
    frame::encode_orders(&[order(1)], &mut out);
    let orders = out[LEN_BYTES + 1..].to_vec();
    let error = refused(3, &raw(0x84, &orders[..79]), "length");
    assert!(
        error.problem.contains("0 orders and 79 bytes over"),
        "{error}"
    );
    let mut bad = orders.clone();
    bad[21] = 0;
    let bytes = raw(0x84, &bad);
    let Frame::Orders(body) = decode_one(3, &bytes).unwrap() else {
        panic!("not orders")
    };
    let error = body.decode_into(&mut Vec::new()).unwrap_err();
    assert_eq!(error.field, "orders[0].status");
    let mut bad = orders.clone();
    bad[20] = 3;
    let bytes = raw(0x84, &bad);
    let Frame::Orders(body) = decode_one(3, &bytes).unwrap() else {
        panic!("not orders")
    };
    assert_eq!(
        body.decode_into(&mut Vec::new()).unwrap_err().field,
        "orders[0].side"
    );

    out.clear();
    frame::encode_error(
        &ServerError {
            code: ErrorCode::Malformed,
            frame: 2,
            id: 0,
            index: None,
            oldest: None,
            field: "kind".into(),
            message: "ok".into(),
        },
        &mut out,
    );
    let error = out[LEN_BYTES + 1..].to_vec();
    let mut bad = error.clone();
    bad[0] = 0;
    refused(4, &raw(0x85, &bad), "code");
    let mut bad = error.clone();
    bad[0] = 10;
    refused(4, &raw(0x85, &bad), "code");
    let mut bad = error.clone();
    *bad.last_mut().unwrap() = 0xff;
    refused(4, &raw(0x85, &bad), "message");
    let mut bad = error.clone();
    bad[48] = 0xc3; // the field's first byte: a lone UTF-8 lead byte
    refused(4, &raw(0x85, &bad), "field");
    refused(4, &raw(0x85, &error[..error.len() - 1]), "length");
    let mut bad = error.clone();
    bad[30] = 1;
    refused(4, &raw(0x85, &bad), "oldest");
}

#[test]
fn over_long_error_texts_are_cut_on_a_character() {
    let mut out = Vec::new();
    frame::encode_error(
        &ServerError {
            code: ErrorCode::Refused,
            frame: 1,
            id: 1,
            index: Some(1),
            oldest: None,
            field: "é".repeat(200),
            message: "€".repeat(30_000),
        },
        &mut out,
    );
    let Frame::Error(error) = decode_one(1, &out).unwrap() else {
        panic!("not an error")
    };
    assert_eq!(error.field, "é".repeat(127));
    assert_eq!(error.message, "€".repeat(21_845));
}

#[test]
fn the_largest_batch_fits_the_largest_frame() {
    let events = vec![insert(1); MAX_BATCH_EVENTS as usize];
    let mut out = Vec::new();
    frame::encode_batch(1, &events, &mut out);
    assert_eq!(out.len(), LEN_BYTES + MAX_FRAME_LEN as usize);
    let Frame::Batch(batch) = decode_one(1, &out).unwrap() else {
        panic!("not a batch")
    };
    assert_eq!(batch.count, MAX_BATCH_EVENTS);
}

#[test]
fn shard_frames_round_trip_and_malformed_ones_name_the_field() {
    let mut out = Vec::new();
    let two = VectorCursor::from_positions(&[Cursor::new(3, 2), Cursor::new(9, 4)]).unwrap();
    let read = VectorRead {
        cursor: (&two).into(),
        filter: Filter::Firm(FirmId(7)),
        limit: 500,
        min_batch: 10,
        wait_ms: 20,
        linger_us: 500,
    };
    frame::encode_read_vector(4, &read, &mut out);
    assert_eq!(out.len(), LEN_BYTES + 1 + 32 + 38);
    let decoded = decode_one(2, &out).unwrap();
    assert_eq!(decoded, Frame::ReadV { request: 4, read });
    let Frame::ReadV { read: back, .. } = decoded else {
        unreachable!()
    };
    assert_eq!(back.cursor.cursor(), Ok(two));

    let header = VectorHeader {
        request: 4,
        next: two,
        count: 3,
        oldest_created_at: Some(17),
        server_wait_us: 5,
        server_read_us: 6,
    };
    out.clear();
    frame::encode_header_vector(&header, &mut out);
    assert_eq!(decode_one(2, &out).unwrap(), Frame::HeaderV(header));

    let follow = Follow {
        shard: 1,
        max_orders: 0,
        after: Cursor::new(50, u64::MAX),
        known_floor: Cursor::new(10, 3),
        heartbeat_ms: 250,
    };
    out.clear();
    frame::encode_follow(&follow, &mut out);
    assert_eq!(decode_one(2, &out).unwrap(), Frame::Follow(follow));

    let orders = [order(1), order(2)];
    let head = ReplicateHead {
        shard: 1,
        shards: 2,
        count: 2,
        newest_seq: 99,
        floor: Cursor::new(10, 3),
        next: orders[1].position(),
        complete: true,
    };
    out.clear();
    frame::encode_replicate(&head, &orders, &mut out);
    let Frame::Replicate(replicate) = decode_one(3, &out).unwrap() else {
        panic!("not a REPLICATE")
    };
    assert_eq!(replicate.head, head);
    let mut decoded = Vec::new();
    replicate.decode_into(Cursor::START, &mut decoded).unwrap();
    assert_eq!(decoded, orders);
    // Orders not after the position followed from are a broken stream.
    let error = replicate
        .decode_into(orders[0].position(), &mut Vec::new())
        .unwrap_err();
    assert_eq!(error.field, "orders[0].seq");

    // A vector cursor too old: after the message, its length where 0s were.
    let error = ServerError {
        code: ErrorCode::CursorTooOld,
        frame: 4,
        id: 2,
        index: None,
        oldest: Some(two),
        field: "cursor".into(),
        message: "too old".into(),
    };
    out.clear();
    frame::encode_error(&error, &mut out);
    assert_eq!(decode_one(5, &out).unwrap(), Frame::Error(error));

    // Malformed: a cursor longer than any, a filter unknown, reserved bytes set, a
    // REPLICATE whose count and orders disagree.
    let mut good = Vec::new();
    frame::encode_read_vector(4, &read, &mut good);
    let body = &good[LEN_BYTES + 1..];
    let mut bad = body.to_vec();
    bad[10..12].copy_from_slice(&300u16.to_le_bytes());
    refused(2, &raw(0x04, &bad), "cursor_len");
    let mut bad = body.to_vec();
    bad[8] = 9;
    refused(2, &raw(0x04, &bad), "filter");
    let mut bad = body.to_vec();
    bad[30] = 1;
    refused(2, &raw(0x04, &bad), "reserved");
    refused(2, &raw(0x04, &body[..body.len() - 1]), "length");
    let mut good = Vec::new();
    frame::encode_replicate(&head, &orders, &mut good);
    let body = &good[LEN_BYTES + 1..];
    refused(3, &raw(0x87, &body[..body.len() - 1]), "count");
    let mut bad = body.to_vec();
    bad[48] = 2;
    refused(3, &raw(0x87, &bad), "complete");
}
