//! Current-state semantics, all-or-nothing batches, durability and retention, on real
//! files in temporary directories.

use crate::common;

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};

use common::{options, read_all, Book};
use tranche_feed::*;

fn log_path(store: &Store) -> std::path::PathBuf {
    let mut logs: Vec<_> = std::fs::read_dir(store.dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().expect("a log segment")
}

#[test]
fn an_order_changed_twice_is_delivered_once_at_its_latest_version() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
    let mut book = Book::new(1);
    let a = book.insert_for(1);
    let b = book.insert_for(1);
    let c = book.insert_for(2);
    writer.apply(&[a, b, c]).unwrap();
    let first = store.read(Cursor::START, Filter::All, 10).unwrap();
    assert_eq!(first.orders.len(), 3);

    let change1 = book.change(a.order_id());
    let change2 = book.change(a.order_id());
    writer.apply(&[change1]).unwrap();
    writer.apply(&[change2]).unwrap();

    let all = store.read(Cursor::START, Filter::All, 10).unwrap();
    let ids: Vec<_> = all.orders.iter().map(|o| o.id).collect();
    assert_eq!(ids, [b.order_id(), c.order_id(), a.order_id()]);
    assert_eq!(all.orders[2], book.orders[&a.order_id()]);
    assert_eq!(all.orders[2].seq, change2.seq());

    // A reader that saw the first page gets only the changed order, once.
    let since = store.read(first.next, Filter::All, 10).unwrap();
    assert_eq!(since.orders, vec![book.orders[&a.order_id()]]);
    assert_eq!(since.next, book.orders[&a.order_id()].position());
    assert!(store
        .read(since.next, Filter::All, 10)
        .unwrap()
        .orders
        .is_empty());
    assert_eq!(store.get(a.order_id()), Some(book.orders[&a.order_id()]));
}

#[test]
fn a_reader_paging_through_never_misses_or_repeats_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
    let mut book = Book::new(2);
    writer.apply(&book.batch(60)).unwrap();

    let mut seen: HashMap<OrderId, Order> = HashMap::new();
    let mut cursor = Cursor::START;
    let mut last_position = Cursor::START;
    for round in 0..200 {
        let page = store.read(cursor, Filter::All, 7).unwrap();
        for order in &page.orders {
            assert!(
                order.position() > last_position,
                "reordered at round {round}"
            );
            last_position = order.position();
            if let Some(before) = seen.insert(order.id, *order) {
                assert!(before.seq < order.seq, "the same version twice: {order:?}");
            }
        }
        cursor = page.next;
        // Changes land between pages, some to orders the reader has not reached yet.
        writer.apply(&book.batch(3)).unwrap();
    }
    let rest = read_all(&store, cursor, Filter::All, 7);
    for order in rest {
        seen.insert(order.id, order);
    }
    assert_eq!(seen, book.orders);
}

#[test]
fn filtered_reads_equal_the_unfiltered_read_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
    let mut book = Book::new(3);
    for _ in 0..40 {
        writer.apply(&book.batch(25)).unwrap();
    }
    let all = read_all(&store, Cursor::START, Filter::All, 13);
    assert_eq!(all, book.expected(Filter::All));
    let mut filters = Vec::new();
    for order in &all {
        filters.push(Filter::Firm(order.firm));
        filters.push(Filter::Broker(order.broker));
        filters.push(Filter::Instrument(order.instrument));
    }
    filters.push(Filter::Firm(FirmId(999)));
    filters.sort_by_key(|f| format!("{f:?}"));
    filters.dedup();
    let middle = all[all.len() / 2].position();
    for filter in filters {
        for from in [Cursor::START, middle] {
            let filtered: Vec<Order> = all
                .iter()
                .filter(|o| o.position() > from && filter.matches(o))
                .copied()
                .collect();
            assert_eq!(read_all(&store, from, filter, 5), filtered, "{filter:?}");
            let ready = store.count_after(from, filter, usize::MAX).unwrap();
            assert_eq!(ready, filtered.len(), "{filter:?}");
        }
    }
}

#[test]
fn a_batch_with_a_bad_event_applies_nothing_and_names_the_event_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
    let mut book = Book::new(4);
    let first = book.batch(5);
    writer.apply(&first).unwrap();
    let log_before = writer.log_bytes();
    let before = read_all(&store, Cursor::START, Filter::All, 100);

    let mut probe = Book::new(4);
    probe.batch(5);
    let good = probe.insert();
    let unknown = Event::Change(OrderChange {
        seq: probe.seq + 1,
        id: OrderId(1),
        price: 1,
        quantity: 1,
        filled: 0,
        status: Status::Cancelled,
        updated_at: u64::MAX,
    });
    let error = match writer.apply(&[good, unknown]) {
        Err(ApplyError::Batch(error)) => error,
        other => panic!("expected a batch error, got {other:?}"),
    };
    assert_eq!((error.index, error.field), (1, "id"));
    assert_eq!(
        error.to_string(),
        "event 1 (order 1), field id: expected a known order, got an unknown one"
    );

    // A sequence number that does not grow.
    let mut stale = probe.insert();
    if let Event::Insert(new) = &mut stale {
        new.seq = 3;
    }
    let error = match writer.apply(&[good, stale]) {
        Err(ApplyError::Batch(error)) => error,
        other => panic!("expected a batch error, got {other:?}"),
    };
    assert_eq!((error.index, error.field), (1, "seq"));
    assert!(error.problem.contains("expected more than"), "{error}");

    // A fill beyond the quantity, on an order inserted earlier in the same batch.
    let mut over = Book::new(4);
    over.batch(5);
    let insert = over.insert();
    let Event::Change(mut fill) = over.change(insert.order_id()) else {
        unreachable!()
    };
    fill.filled = fill.quantity + 1;
    let error = match writer.apply(&[insert, Event::Change(fill)]) {
        Err(ApplyError::Batch(error)) => error,
        other => panic!("expected a batch error, got {other:?}"),
    };
    assert_eq!((error.index, error.field), (1, "filled"));

    // A batch too big for one log record.
    let huge = vec![good; MAX_BATCH + 1];
    let error = match writer.apply(&huge) {
        Err(ApplyError::Batch(error)) => error,
        other => panic!("expected a batch error, got {other:?}"),
    };
    assert_eq!((error.index, error.field), (MAX_BATCH, "batch"));

    // Nothing of any refused batch is visible or logged.
    assert_eq!(read_all(&store, Cursor::START, Filter::All, 100), before);
    assert_eq!(writer.log_bytes(), log_before);
    assert_eq!(store.get(good.order_id()), None);

    // In a group, a refused batch leaves the others applied.
    let b1 = book.batch(3);
    let valid = NewOrder {
        seq: u64::MAX - 1,
        rec: u64::MAX - 1,
        id: OrderId(5),
        firm: FirmId(1),
        broker: BrokerId(11),
        instrument: InstrumentId(1),
        side: Side::Sell,
        price: 10,
        quantity: 10,
        created_at: 1,
    };
    let zero = NewOrder {
        seq: u64::MAX,
        rec: u64::MAX,
        id: OrderId(6),
        quantity: 0,
        ..valid
    };
    let bad = [Event::Insert(valid), Event::Insert(zero)];
    let b3 = book.batch(3);
    let results = writer.apply_group(&[&b1, &bad, &b3]).unwrap();
    assert!(results[0].is_ok() && results[2].is_ok());
    let refused = results[1].as_ref().unwrap_err();
    assert_eq!((refused.index, refused.field), (1, "quantity"));
    for event in b1.iter().chain(&b3) {
        assert_eq!(store.get(event.order_id()).unwrap().id, event.order_id());
    }
    assert_eq!(store.get(OrderId(5)), None);
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 100),
        book.expected(Filter::All)
    );
}

#[test]
fn a_restart_restores_every_order_and_old_cursors_stay_valid() {
    let dir = tempfile::tempdir().unwrap();
    let mut book = Book::new(5);
    let mut cursors = Vec::new();
    let before;
    {
        let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
        for _ in 0..30 {
            cursors.push(writer.apply(&book.batch(10)).unwrap());
        }
        before = cursors
            .iter()
            .map(|c| read_all(&store, *c, Filter::All, 50))
            .collect::<Vec<_>>();
    }
    let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
    assert_eq!(writer.recovery().torn_bytes, 0);
    book.resume(&store);
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 50),
        book.expected(Filter::All)
    );
    for (cursor, expected) in cursors.iter().zip(&before) {
        let text = cursor.to_string();
        let parsed: Cursor = text.parse().unwrap();
        assert_eq!(&read_all(&store, parsed, Filter::All, 50), expected);
    }
    // And the core carries on where it stopped.
    writer.apply(&book.batch(10)).unwrap();
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 50),
        book.expected(Filter::All)
    );
}

#[test]
fn a_torn_tail_is_cut_off_losing_only_the_unacknowledged_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut book = Book::new(6);
    let acknowledged;
    let torn_at;
    let full_len;
    {
        let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
        for _ in 0..5 {
            writer.apply(&book.batch(10)).unwrap();
        }
        acknowledged = read_all(&store, Cursor::START, Filter::All, 100);
        torn_at = writer.log_bytes();
        writer.apply(&book.batch(10)).unwrap();
        full_len = writer.log_bytes();
    }
    // A crash half way through writing the last batch.
    let dir_store = dir.path().to_path_buf();
    let path = {
        let (store, _w) = Store::open(&dir_store, options()).unwrap();
        log_path(&store)
    };
    let cut = torn_at + (full_len - torn_at) / 2;
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();

    let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
    assert_eq!(writer.recovery().torn_bytes, cut - torn_at);
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 100),
        acknowledged
    );
    // Nothing of the torn batch is left: the file ends at the last acknowledged batch,
    // or (where the store keeps zeros written ahead of the log, on ext4 or XFS) only
    // zeros follow it, which its own thread may be writing as this reads.
    let after = std::fs::read(&path).unwrap();
    assert!(
        after.len() as u64 >= torn_at,
        "cut to {}, before {torn_at}",
        after.len()
    );
    assert!(
        after[torn_at as usize..].iter().all(|&b| b == 0),
        "a byte of the torn batch is left after {torn_at}"
    );

    // The store goes on from the last acknowledged batch, and reopens cleanly.
    let mut again = Book::new(6);
    for _ in 0..5 {
        again.batch(10);
    }
    writer.apply(&again.batch(10)).unwrap();
    drop(writer);
    drop(store);
    let (store, writer) = Store::open(dir.path(), options()).unwrap();
    assert_eq!(writer.recovery().torn_bytes, 0);
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 100),
        again.expected(Filter::All)
    );

    // A zero-filled tail (zeros written ahead, or space allocated whose data never
    // reached the disk) holds nothing either.
    drop(writer);
    drop(store);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(&[0u8; 300]).unwrap();
    drop(file);
    let (store, writer) = Store::open(dir.path(), options()).unwrap();
    assert_eq!(writer.recovery().torn_bytes, 0);
    assert_eq!(writer.recovery().zeroed_bytes, 300);
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 100),
        again.expected(Filter::All)
    );
}

/// Copies the store's files as they are now: what a kill -9 leaves on disk.
fn crash_image(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n != "LOCK") {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

#[test]
fn zeros_written_ahead_of_the_log_are_skipped_after_a_crash_and_cut_off_on_close() {
    // Under the build directory: zeros are written on ext4, XFS or an overlay only,
    // and /tmp may be a tmpfs.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let live = dir.path().join("live");
    let crashed = dir.path().join("crashed");
    let ahead = 512 << 10;
    let zeroing = FeedOptions {
        zero_ahead: Some(ahead),
        ..options()
    };
    let mut book = Book::new(12);
    let (store, mut writer) = Store::open(&live, zeroing.clone()).unwrap();
    let zeroes = writer.zeroes_ahead();
    if !zeroes {
        eprintln!(
            "{} is on no ext4, XFS or overlay: no zeros written",
            dir.path().display()
        );
    }
    // Past the first lead of zeros, so the writer has written over some of them.
    while writer.log_bytes() < 2 * ahead {
        writer.apply(&book.batch(100)).unwrap();
    }
    let log = log_path(&store);
    if zeroes {
        tranche_test_support::eventually(
            &format!("zeros at least {} bytes past the log's end", ahead / 2),
            std::time::Duration::from_secs(10),
            || {
                let len = std::fs::metadata(&log).unwrap().len();
                if len >= writer.log_bytes() + ahead / 2 {
                    Ok(())
                } else {
                    Err(format!("a file of {len} bytes"))
                }
            },
        );
    }
    crash_image(&live, &crashed);
    let image_len = std::fs::metadata(crashed.join(log.file_name().unwrap()))
        .unwrap()
        .len();

    // The crash image: every write is there, the zeros are skipped and cut off.
    {
        let (copy, copy_writer) = Store::open(&crashed, zeroing.clone()).unwrap();
        let recovery = copy_writer.recovery();
        assert_eq!(recovery.torn_bytes, 0);
        assert_eq!(recovery.zeroed_bytes, image_len - writer.log_bytes());
        assert_eq!(copy_writer.log_bytes(), writer.log_bytes());
        assert_eq!(
            read_all(&copy, Cursor::START, Filter::All, 1000),
            book.expected(Filter::All)
        );
    }

    // A clean close leaves the log exactly as long as what was written.
    let written = writer.log_bytes();
    drop(writer);
    drop(store);
    assert_eq!(std::fs::metadata(&log).unwrap().len(), written);
    let (store, writer) = Store::open(&live, zeroing).unwrap();
    assert_eq!(writer.recovery().zeroed_bytes, 0);
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 1000),
        book.expected(Filter::All)
    );
}

#[test]
fn a_corrupted_byte_in_the_middle_is_an_error_naming_the_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut book = Book::new(7);
    let second_record;
    let path;
    {
        let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
        writer.apply(&book.batch(10)).unwrap();
        second_record = writer.log_bytes();
        writer.apply(&book.batch(10)).unwrap();
        writer.apply(&book.batch(10)).unwrap();
        path = log_path(&store);
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    file.seek(SeekFrom::Start(second_record + 40)).unwrap();
    file.write_all(&[0xA5]).unwrap();
    drop(file);

    match Store::open(dir.path(), options()) {
        Err(StoreError::Corrupt {
            path: at,
            offset,
            problem,
        }) => {
            assert_eq!(at, path);
            assert_eq!(offset, second_record);
            assert!(problem.contains("checksum"), "{problem}");
        }
        other => panic!("expected a corruption error, got {other:?}"),
    }
    let message = Store::open(dir.path(), options()).unwrap_err().to_string();
    assert!(
        message.contains(&path.display().to_string())
            && message.contains(&format!("offset {second_record}")),
        "{message}"
    );
}

#[test]
fn snapshot_and_log_replay_equal_a_store_built_from_the_events() {
    let snap_dir = tempfile::tempdir().unwrap();
    let plain_dir = tempfile::tempdir().unwrap();
    let mut book = Book::new(8);
    let mut batches = Vec::new();
    for _ in 0..60 {
        batches.push(book.batch(15));
    }
    {
        let (_, mut writer) = Store::open(snap_dir.path(), options()).unwrap();
        for (i, batch) in batches.iter().enumerate() {
            writer.apply(batch).unwrap();
            if i == 20 || i == 45 {
                let info = writer.snapshot().unwrap();
                assert_eq!(info.seq, batch.last().unwrap().seq());
            }
        }
        let (_, mut plain) = Store::open(plain_dir.path(), options()).unwrap();
        for batch in &batches {
            plain.apply(batch).unwrap();
        }
    }
    let names: Vec<String> = std::fs::read_dir(snap_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "LOCK")
        .collect();
    assert_eq!(names.len(), 2, "one snapshot and one segment: {names:?}");

    let (snapped, writer) = Store::open(snap_dir.path(), options()).unwrap();
    assert!(writer.recovery().snapshot.is_some());
    let (plain, _w) = Store::open(plain_dir.path(), options()).unwrap();
    let everything = read_all(&plain, Cursor::START, Filter::All, 64);
    assert_eq!(everything, book.expected(Filter::All));
    assert_eq!(
        read_all(&snapped, Cursor::START, Filter::All, 64),
        everything
    );
    assert_eq!(snapped.marks(), plain.marks());
    for filter in [Filter::Firm(FirmId(2)), Filter::Instrument(InstrumentId(3))] {
        let cursor = everything[everything.len() / 3].position();
        assert_eq!(
            read_all(&snapped, cursor, filter, 64),
            read_all(&plain, cursor, filter, 64)
        );
    }
}

#[test]
fn an_automatic_snapshot_keeps_the_log_short() {
    let dir = tempfile::tempdir().unwrap();
    let mut book = Book::new(9);
    let small = FeedOptions {
        durability: Durability::Never,
        snapshot_after_bytes: Some(4096),
        zero_ahead: None,
    };
    let mut written = 0;
    {
        let (_, mut writer) = Store::open(dir.path(), small.clone()).unwrap();
        for _ in 0..50 {
            let before = writer.log_bytes();
            writer.apply(&book.batch(10)).unwrap();
            written += writer.log_bytes().saturating_sub(before);
        }
        // Dropping the writer waits for a snapshot under way.
    }
    let logs: Vec<u64> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect();
    assert_eq!(logs.len(), 1, "the older segments are deleted");
    assert!(logs[0] < written, "{} of {written} bytes kept", logs[0]);
    let (store, writer) = Store::open(dir.path(), small).unwrap();
    assert!(writer.recovery().snapshot.is_some());
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 100),
        book.expected(Filter::All)
    );
}

#[test]
fn eviction_keeps_open_orders_and_refuses_older_cursors_with_the_oldest() {
    let dir = tempfile::tempdir().unwrap();
    let mut book = Book::new(10);
    let early;
    let floor;
    {
        let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
        early = writer.apply(&book.batch(50)).unwrap();
        for _ in 0..20 {
            writer.apply(&book.batch(20)).unwrap();
        }
        floor = writer.apply(&book.batch(20)).unwrap();
        writer.apply(&book.batch(20)).unwrap();
        let terminal_before_floor = book
            .orders
            .values()
            .filter(|o| o.position() <= floor && o.status.is_terminal())
            .count();
        assert!(terminal_before_floor > 0);
        assert_eq!(
            writer.evict_terminal_through(floor).unwrap(),
            terminal_before_floor
        );
        assert!(matches!(
            writer.evict_terminal_through(early),
            Err(StoreError::Floor { .. })
        ));
        assert_eq!(store.oldest(), floor);
    }
    book.orders
        .retain(|_, o| o.position() > floor || !o.status.is_terminal());
    let (store, _w) = Store::open(dir.path(), options()).unwrap();
    assert_eq!(store.oldest(), floor);
    assert_eq!(
        store.read(early, Filter::All, 10),
        Err(ReadError::TooOld {
            cursor: early,
            oldest: floor
        })
    );
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 100),
        book.expected(Filter::All)
    );
    assert!(store.read(floor, Filter::All, 10).is_ok());
    let ahead = Cursor::new(book.seq + 1, 0);
    assert!(matches!(
        store.read(ahead, Filter::All, 10),
        Err(ReadError::Ahead { .. })
    ));
}

#[test]
fn a_second_writer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, _writer) = Store::open(dir.path(), options()).unwrap();
    match Store::open(dir.path(), options()) {
        Err(StoreError::Locked { path }) => assert!(path.ends_with("LOCK")),
        other => panic!("expected the store to be locked, got {other:?}"),
    }
}

#[test]
fn a_damaged_snapshot_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut book = Book::new(11);
    let info = {
        let (_, mut writer) = Store::open(dir.path(), options()).unwrap();
        writer.apply(&book.batch(30)).unwrap();
        writer.snapshot().unwrap()
    };
    assert_eq!(info.orders, book.orders.len() as u64);
    let mut file = OpenOptions::new().write(true).open(&info.path).unwrap();
    file.seek(SeekFrom::Start(100)).unwrap();
    file.write_all(&[0xFF, 0xFF]).unwrap();
    drop(file);
    match Store::open(dir.path(), options()) {
        Err(StoreError::Corrupt { path, problem, .. }) => {
            assert_eq!(path, info.path);
            assert!(problem.contains("checksum"), "{problem}");
        }
        other => panic!("expected a corruption error, got {other:?}"),
    }
}

#[test]
fn interval_durability_syncs_when_due_and_never_loses_a_clean_close() {
    let dir = tempfile::tempdir().unwrap();
    let mut book = Book::new(12);
    {
        let (_, mut writer) = Store::open(
            dir.path(),
            FeedOptions {
                durability: Durability::Interval(std::time::Duration::from_secs(3600)),
                snapshot_after_bytes: None,
                zero_ahead: None,
            },
        )
        .unwrap();
        writer.apply(&book.batch(10)).unwrap();
        // Not due for an hour.
        assert!(!writer.sync_if_due().unwrap());
        writer.apply(&book.batch(10)).unwrap();
    }
    {
        let (store, mut writer) = Store::open(
            dir.path(),
            FeedOptions {
                durability: Durability::Interval(std::time::Duration::ZERO),
                snapshot_after_bytes: None,
                zero_ahead: None,
            },
        )
        .unwrap();
        assert_eq!(
            read_all(&store, Cursor::START, Filter::All, 100),
            book.expected(Filter::All)
        );
        // A zero interval syncs at the write itself: nothing is left to sync.
        writer.apply(&book.batch(10)).unwrap();
        assert!(!writer.sync_if_due().unwrap());
    }
    let (store, _w) = Store::open(dir.path(), options()).unwrap();
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 100),
        book.expected(Filter::All)
    );
}

#[test]
fn a_long_page_read_in_slices_equals_short_pages() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
    let mut book = Book::new(13);
    for _ in 0..30 {
        let batch: Vec<Event> = (0..100).map(|_| book.insert()).collect();
        writer.apply(&batch).unwrap();
    }
    writer.apply(&book.batch(500)).unwrap();
    for filter in [Filter::All, Filter::Firm(FirmId(1))] {
        let expected = book.expected(filter);
        let whole = store.read(Cursor::START, filter, MAX_READ_LIMIT).unwrap();
        assert_eq!(whole.orders, expected);
        let part = store.read(Cursor::START, filter, 600).unwrap();
        assert_eq!(part.orders, expected[..600]);
        assert_eq!(part.next, expected[599].position());
        assert_eq!(read_all(&store, part.next, filter, 1024), expected[600..]);
    }
    let capped = store.read(Cursor::START, Filter::All, usize::MAX).unwrap();
    assert_eq!(capped.orders.len(), book.orders.len().min(MAX_READ_LIMIT));
}

#[test]
fn a_snapshot_taken_while_writes_go_on_plus_the_log_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let mut book = Book::new(14);
    let no_auto = FeedOptions {
        durability: Durability::Never,
        snapshot_after_bytes: None,
        zero_ahead: None,
    };
    {
        let (_, mut writer) = Store::open(dir.path(), no_auto.clone()).unwrap();
        for _ in 0..200 {
            writer.apply(&book.batch(100)).unwrap();
        }
        assert!(writer.begin_snapshot().unwrap());
        assert!(!writer.begin_snapshot().unwrap(), "one at a time");
        // Changes (moving orders past the snapshot's end) while it copies.
        for _ in 0..100 {
            writer.apply(&book.batch(50)).unwrap();
        }
        // Dropping the writer waits for the snapshot.
    }
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.ends_with(".snap")), "{names:?}");
    assert_eq!(
        names.iter().filter(|n| n.ends_with(".log")).count(),
        1,
        "{names:?}"
    );
    let (store, writer) = Store::open(dir.path(), no_auto).unwrap();
    assert!(writer.recovery().snapshot.is_some());
    assert_eq!(
        read_all(&store, Cursor::START, Filter::All, 1000),
        book.expected(Filter::All)
    );
    assert_eq!(store.marks(), (book.seq, book.rec));
}
