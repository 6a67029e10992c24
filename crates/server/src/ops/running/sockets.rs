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

/// A listener that is accepting.
pub(super) struct LiveListener {
    /// The address as written in the config (port 0 included): what a reload matches on.
    pub configured: SocketAddr,
    pub bound: BoundListener,
    pub state: SharedState,
    /// `true` (or dropping it) stops accepting and drains the listener's connections.
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
            continue;
        }
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
        listeners.push(Slot::New(socket, address));
    }
    Ok(Sockets { listeners, admin })
}
