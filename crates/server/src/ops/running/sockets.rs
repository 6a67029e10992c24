//! Listening sockets across reloads, matched by the address written in the config (by address
//! and name for port 0, which several listeners may write): a listener whose address is still
//! in the file keeps its socket (the same `TcpListener` goes on
//! accepting, so no connection attempt is refused during a reload); a new address is bound
//! before anything changes, and a bind failure refuses the whole reload; an address gone from
//! the file stops accepting and its connections drain.

use std::net::SocketAddr;

use sluice_config::Config;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::{BoundListener, StartError};
use crate::net::conn::SharedState;
use crate::net::h3::Endpoint;

/// A listener that is accepting.
pub(super) struct LiveListener {
    /// The address as written in the config (port 0 included): what a reload matches on.
    pub configured: SocketAddr,
    pub bound: BoundListener,
    pub state: SharedState,
    /// `true` (or dropping it) stops accepting and drains the listener's connections.
    pub stop: watch::Sender<bool>,
    /// The QUIC side (HTTP/3), while the listener has `h3` in its protocols.
    pub quic: Option<LiveQuic>,
}

/// A listener's QUIC endpoint, while it accepts.
pub(super) struct LiveQuic {
    pub endpoint: Endpoint,
    /// `true` (or dropping it) stops its handshakes; its connections send GOAWAY and drain.
    pub stop: watch::Sender<bool>,
}

/// The admin listener, while it runs.
pub(super) struct LiveAdmin {
    pub configured: SocketAddr,
    pub address: SocketAddr,
    pub stop: watch::Sender<bool>,
}

/// Where each listener of a new config gets its socket.
pub(super) enum Slot {
    /// From the running listener at this index.
    Kept(usize),
    /// Newly bound, at this address.
    New(TcpListener, SocketAddr),
}

pub(super) enum AdminSlot {
    Off,
    Kept,
    New(TcpListener, SocketAddr),
}

/// The sockets of a config: one slot per listener, in file order, and the admin's.
pub(super) struct Sockets {
    pub listeners: Vec<Slot>,
    /// Per listener, in file order: a QUIC endpoint newly bound for it (`h3` newly on, or a
    /// new address); `None` when it serves no HTTP/3 or keeps its running endpoint.
    pub quic: Vec<Option<Endpoint>>,
    pub admin: AdminSlot,
}

/// Bind what `config` needs that `live` and `admin` do not already have. Nothing running
/// changes; on error the sockets bound so far are closed again.
pub(super) async fn bind(
    config: &Config,
    live: &[LiveListener],
    admin: Option<&LiveAdmin>,
) -> Result<Sockets, StartError> {
    // The admin first: at start-up, a clash there should stop before anything else is bound.
    let admin = match (&config.admin, admin) {
        (None, _) => AdminSlot::Off,
        (Some(wanted), Some(running)) if running.configured == wanted.address => AdminSlot::Kept,
        (Some(wanted), _) => {
            let socket = TcpListener::bind(wanted.address).await.map_err(|e| {
                StartError(format!(
                    "admin listener: cannot listen on {}: {e}",
                    wanted.address
                ))
            })?;
            let address = socket.local_addr().map_err(|e| StartError(e.to_string()))?;
            AdminSlot::New(socket, address)
        }
    };
    let mut listeners = Vec::with_capacity(config.listeners.len());
    let mut quic = Vec::with_capacity(config.listeners.len());
    let mut taken = vec![false; live.len()];
    for listener in &config.listeners {
        // Port 0 may be written by several listeners (each gets its own port): those are told
        // apart by name.
        let same = |l: &LiveListener| {
            l.configured == listener.address
                && (listener.address.port() != 0 || l.bound.name == listener.name)
        };
        if let Some(index) = (0..live.len()).find(|&i| !taken[i] && same(&live[i])) {
            taken[index] = true;
            listeners.push(Slot::Kept(index));
            let running = &live[index];
            quic.push(match (listener.protocols.http3, &running.quic) {
                (true, None) => Some(bind_quic(&listener.name, running.bound.address)?),
                _ => None,
            });
            continue;
        }
        let (socket, address, endpoint) = bind_both(listener).await?;
        listeners.push(Slot::New(socket, address));
        quic.push(endpoint);
    }
    Ok(Sockets {
        listeners,
        quic,
        admin,
    })
}

/// A QUIC endpoint on `address` (UDP), not serving until a configuration is put in.
fn bind_quic(name: &str, address: SocketAddr) -> Result<Endpoint, StartError> {
    crate::net::h3::bind(address)
        .and_then(Endpoint::unconfigured)
        .map_err(|e| {
            StartError(format!(
                "listener `{name}`: cannot listen on UDP {address} for HTTP/3: {e}"
            ))
        })
}

/// How often a listener on port 0 with `h3` looks for a port free on both TCP and UDP.
const PORT_ATTEMPTS: usize = 16;

/// A new listener's TCP socket and, with `h3`, its UDP endpoint on the same address. Port 0
/// asks the OS for a TCP port, which may be taken on UDP: another port is tried then.
async fn bind_both(
    listener: &sluice_config::Listener,
) -> Result<(TcpListener, SocketAddr, Option<Endpoint>), StartError> {
    let mut attempt = 0;
    loop {
        let (socket, address) = bind_tcp(listener).await?;
        if !listener.protocols.http3 {
            return Ok((socket, address, None));
        }
        match bind_quic(&listener.name, address) {
            Ok(endpoint) => return Ok((socket, address, Some(endpoint))),
            Err(_) if listener.address.port() == 0 && attempt + 1 < PORT_ATTEMPTS => attempt += 1,
            Err(err) => return Err(err),
        }
    }
}

async fn bind_tcp(
    listener: &sluice_config::Listener,
) -> Result<(TcpListener, SocketAddr), StartError> {
    let socket = TcpListener::bind(listener.address).await.map_err(|e| {
        StartError(format!(
            "listener `{}`: cannot listen on {}: {e}{}",
            listener.name,
            listener.address,
            if e.kind() == std::io::ErrorKind::AddrInUse {
                " (is another server running on that port? change `address`)"
            } else {
                ""
            }
        ))
    })?;
    let address = socket.local_addr().map_err(|e| StartError(e.to_string()))?;
    Ok((socket, address))
}
