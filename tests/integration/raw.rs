//! Raw Handle protocol exchanges, for tests that send what the client never would
//! (malformed, oversized or unknown requests) or look at the datagrams themselves.
//!
//! Blocking std sockets with read timeouts: every loop is bounded in count and time.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use hdl::codec::{
    Body, Envelope, Frame, Header, MAX_DATAGRAM_LEN, Message, OpCode, ProtocolVersion, Reassembler,
    Request, ResolutionRequest, next_frame,
};

/// How long a raw exchange may take. An authoritative read right after a failover
/// may wait up to 5 s for news of the new primary and 5 s more for its read index to
/// be applied, so this leaves room above 10 s.
pub const DEADLINE: Duration = Duration::from_secs(20);
/// Datagrams read before giving up on a UDP answer (a 256 KiB answer is 533).
const MAX_DATAGRAMS: usize = 600;
/// Reads before giving up on a TCP answer.
const MAX_READS: usize = 10_000;

/// Offset of the OpCode in a message (after the 20-octet envelope).
pub const OPCODE_OFFSET: usize = 20;
/// Offset of the first body octet (after envelope and 24-octet header).
pub const BODY_OFFSET: usize = 44;

/// A request message, encoded as the client would, with RequestId `request_id`.
pub fn encode(request: Request, request_id: u32) -> Message {
    let envelope = Envelope::new(ProtocolVersion::MAX_SUPPORTED, request_id);
    let expiry = u32::MAX / 2;
    let header = Header::request(request.opcode(), expiry);
    Message::new(envelope, header, Body::Request(request))
}

/// A resolution request for `handle` (octets as given).
pub fn resolution(handle: &[u8], request_id: u32) -> Message {
    encode(
        Request::Resolution(ResolutionRequest {
            handle: handle.to_vec(),
            indexes: vec![],
            types: vec![],
        }),
        request_id,
    )
}

/// The OpCode of a message's bytes replaced by `opcode`.
pub fn with_opcode(mut bytes: Vec<u8>, opcode: OpCode) -> Vec<u8> {
    bytes[OPCODE_OFFSET..OPCODE_OFFSET + 4].copy_from_slice(&opcode.to_u32().to_be_bytes());
    bytes
}

/// Sends `bytes` on a new TCP connection (then half-closes it) and reads one answer;
/// `None` if the server closed (or reset) the connection without answering.
pub fn tcp(server: SocketAddr, bytes: &[u8]) -> Option<Message> {
    tcp_frame(server, bytes).map(|frame| Message::decode(&frame).expect("decodable answer"))
}

/// As [`tcp`], the answer's octets undecoded (an encrypted answer, say).
pub fn tcp_frame(server: SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&server, DEADLINE).expect("connect");
    // The server may close as soon as it has seen enough (an oversized envelope), so a
    // failed write or half-close is no error here: whatever it answered is still read.
    let _ = stream
        .write_all(bytes)
        .and_then(|()| stream.shutdown(Shutdown::Write));
    let deadline = Instant::now() + DEADLINE;
    let mut buffer = Vec::new();
    for _ in 0..MAX_READS {
        match next_frame(&buffer) {
            Frame::Ready { len } => {
                buffer.truncate(len);
                return Some(buffer);
            }
            Frame::TooLarge { .. } => panic!("the server sent an oversized answer"),
            Frame::Incomplete { .. } => {}
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no answer over TCP in time");
        stream.set_read_timeout(Some(left)).expect("timeout");
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk) {
            Ok(0) => return None,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return None,
            Err(error) => panic!("no answer over TCP: {error}"),
        }
    }
    panic!("TCP answer never completed");
}

/// Sends `message` over UDP and reassembles the answer; returns it with the number
/// of datagrams it came in.
pub fn udp(server: SocketAddr, message: &Message) -> (Message, usize) {
    let (answer, _) = udp_after(server, &[], message);
    answer
}

/// Sends each of `garbage` and then `message` from one UDP socket; returns the answer
/// to `message` (with its datagram count) and every datagram that answered something
/// else.
pub fn udp_after(
    server: SocketAddr,
    garbage: &[Vec<u8>],
    message: &Message,
) -> ((Message, usize), Vec<Vec<u8>>) {
    let datagrams: Vec<Vec<u8>> = garbage
        .iter()
        .cloned()
        .chain(message.encode_datagrams())
        .collect();
    let (whole, received, others) = udp_exchange(server, &datagrams, message.envelope.request_id);
    let answer = Message::decode(&whole).expect("decodable answer");
    ((answer, received), others)
}

/// Sends `datagrams` from one UDP socket and reassembles the answer whose RequestId is
/// `request_id`, undecoded (an encrypted answer, say).
pub fn udp_frame(server: SocketAddr, datagrams: &[Vec<u8>], request_id: u32) -> Vec<u8> {
    udp_exchange(server, datagrams, request_id).0
}

/// Sends `datagrams`, then reads until the answer to `request_id` is whole: its
/// octets, how many datagrams it came in, and every datagram that answered something
/// else.
fn udp_exchange(
    server: SocketAddr,
    datagrams: &[Vec<u8>],
    request_id: u32,
) -> (Vec<u8>, usize, Vec<Vec<u8>>) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.connect(server).expect("connect");
    for datagram in datagrams {
        socket.send(datagram).expect("send");
    }
    let deadline = Instant::now() + DEADLINE;
    let mut reassembler = Reassembler::new();
    let mut others = Vec::new();
    let mut buffer = [0u8; MAX_DATAGRAM_LEN];
    for received in 1..=MAX_DATAGRAMS {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no answer over UDP in time");
        socket.set_read_timeout(Some(left)).expect("timeout");
        let len = socket.recv(&mut buffer).expect("an answer datagram");
        let datagram = &buffer[..len];
        let ours = Envelope::peek(datagram).is_ok_and(|envelope| envelope.request_id == request_id);
        if !ours {
            others.push(datagram.to_vec());
        } else if let Some(whole) = reassembler.push(datagram).expect("a valid piece") {
            return (whole, received - others.len(), others);
        }
    }
    panic!("UDP answer never completed");
}
