//! The signals a serving process answers: SIGTERM and SIGINT drain and stop (a second one exits
//! at once), SIGHUP reloads the config file.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// What a signal asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// SIGTERM or SIGINT.
    Stop,
    /// SIGHUP.
    Reload,
}

/// SIGTERM, SIGINT and SIGHUP, caught from the moment of [`Signals::install`]: installed before
/// anything listens, so a signal that arrives as soon as the address is printed still drains
/// (or reloads) instead of killing the process.
pub struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    pub fn install() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal. Several of a kind arriving together count once (as with any signal).
    pub async fn next(&mut self) -> Event {
        tokio::select! {
            _ = self.term.recv() => Event::Stop,
            _ = self.int.recv() => Event::Stop,
            _ = self.hup.recv() => Event::Reload,
        }
    }

    /// Wait for SIGTERM or SIGINT, saying why a SIGHUP meanwhile does nothing: for commands
    /// that have no config file to read again (`origin`, `demo`, `file-server`, ...), and during
    /// a drain.
    pub async fn stop(&mut self, why_no_reload: &str) {
        while self.next().await == Event::Reload {
            tracing::warn!("SIGHUP ignored: {why_no_reload}");
        }
    }
}
