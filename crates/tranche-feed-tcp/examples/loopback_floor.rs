//! The floor under any polling feed on this host, not a benchmark of ours: what one
//! request and one answer on loopback TCP cost in CPU when nothing else is done
//! with them. Two processes (this one and itself as a child), `CONNECTIONS`
//! connections between them, each with one request in flight: the client sends a
//! 48-byte request, the server answers 320 bytes (a page of two orders with its
//! header), the client sends the next one. Both sides are one thread on `mio`
//! (epoll), the least a server could do per poll; `TCP_NODELAY` as the feed's
//! sockets. Prints the round trips a second and the CPU each took on each side
//! (user and kernel, from `/proc/self/stat`), so the pilot's poll rate can be set
//! against the machine's CPU (docs/order-feed.md, "What limits it on a 2-vCPU
//! machine").
//!
//! `cargo run --release -p tranche-feed-tcp --example loopback_floor -- [CONNECTIONS] [SECONDS]`

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

const REQUEST: usize = 48;
const ANSWER: usize = 320;

/// This process's CPU time so far (user + system), from `/proc/self/stat`.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command's closing parenthesis; utime and stime are the 12th and
    // 13th of them, in clock ticks (100 a second on Linux).
    let after = &stat[stat.rfind(')').expect("a command in parentheses") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10)
}

/// Reads what is there: the bytes read, and whether the connection is still open.
fn drain(stream: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<(usize, bool)> {
    let mut total = 0;
    loop {
        match stream.read(buf) {
            // The client closes with answers still unread: a reset, also the end.
            Ok(0) => return Ok((total, false)),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok((total, false)),
            Ok(n) => total += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok((total, true)),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Registers an accepted or connected stream with `poll` under `token`.
fn register(poll: &Poll, stream: std::net::TcpStream, token: usize) -> std::io::Result<TcpStream> {
    stream.set_nodelay(true)?;
    stream.set_nonblocking(true)?;
    let mut stream = TcpStream::from_std(stream);
    poll.registry()
        .register(&mut stream, Token(token), Interest::READABLE)?;
    Ok(stream)
}

/// Answers every `incoming`-byte message on `streams` with `reply` until every
/// stream is closed or `until` passes; returns the messages answered.
fn exchange(
    poll: &mut Poll,
    streams: &mut [TcpStream],
    incoming: usize,
    reply: &[u8],
    until: Option<Instant>,
) -> std::io::Result<u64> {
    let (mut events, mut buf) = (Events::with_capacity(256), [0u8; 4096]);
    let mut partial = vec![0usize; streams.len()];
    let (mut open, mut answered) = (streams.len(), 0u64);
    while open > 0 && until.is_none_or(|until| Instant::now() < until) {
        poll.poll(&mut events, Some(Duration::from_millis(100)))?;
        for event in &events {
            let i = event.token().0;
            let (n, still) = drain(&mut streams[i], &mut buf)?;
            partial[i] += n;
            while partial[i] >= incoming {
                partial[i] -= incoming;
                answered += 1;
                streams[i].write_all(reply)?;
            }
            if !still {
                poll.registry().deregister(&mut streams[i])?;
                open -= 1;
            }
        }
    }
    Ok(answered)
}

fn serve(listener: std::net::TcpListener, connections: usize) -> std::io::Result<()> {
    let mut poll = Poll::new()?;
    let mut streams = (0..connections)
        .map(|i| register(&poll, listener.accept()?.0, i))
        .collect::<std::io::Result<Vec<_>>>()?;
    let started = cpu();
    exchange(&mut poll, &mut streams, REQUEST, &[b'a'; ANSWER], None)?;
    println!("{}", (cpu() - started).as_micros());
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("--serve") {
        let connections: usize = args.next().ok_or("connections")?.parse()?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        println!("{}", listener.local_addr()?);
        serve(listener, connections)?;
        return Ok(());
    }
    let mut args = std::env::args().skip(1);
    let connections: usize = args.next().map_or(Ok(100), |a| a.parse())?;
    let seconds: f64 = args.next().map_or(Ok(10.0), |a| a.parse())?;
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--serve", &connections.to_string()])
        .stdout(Stdio::piped())
        .spawn()?;
    let mut out = std::io::BufReader::new(child.stdout.take().ok_or("the server's output")?);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line)?;
    let addr: SocketAddr = line.trim().parse()?;

    let mut poll = Poll::new()?;
    let mut streams = (0..connections)
        .map(|i| register(&poll, std::net::TcpStream::connect(addr)?, i))
        .collect::<std::io::Result<Vec<_>>>()?;
    let request = [b'r'; REQUEST];
    for stream in &mut streams {
        stream.write_all(&request)?;
    }
    let (started, cpu_before) = (Instant::now(), cpu());
    let until = started + Duration::from_secs_f64(seconds);
    let round_trips = exchange(&mut poll, &mut streams, ANSWER, &request, Some(until))?;
    let (elapsed, client_cpu) = (started.elapsed(), cpu() - cpu_before);
    drop(streams);
    line.clear();
    std::io::BufRead::read_line(&mut out, &mut line)?;
    let server_cpu = Duration::from_micros(line.trim().parse()?);
    child.wait()?;
    let per = |d: Duration| d.as_secs_f64() * 1e6 / round_trips as f64;
    println!(
        "{connections} connections, {elapsed:.1?}: {:.0} round trips/s; CPU per round trip: \
         client {:.1} us, server {:.1} us, both {:.1} us ({:.2} + {:.2} CPU-s)",
        round_trips as f64 / elapsed.as_secs_f64(),
        per(client_cpu),
        per(server_cpu),
        per(client_cpu + server_cpu),
        client_cpu.as_secs_f64(),
        server_cpu.as_secs_f64(),
    );
    Ok(())
}
