//! The connection table of `boyd serve`: which connections hold a slot, which of them have
//! shown that they are legitimate, and which one gives its slot up when a new connection needs
//! it.
//!
//! Design decision: a connection starts *untrusted* and becomes *trusted* when one of its
//! requests passes the header guard ([`super::guard`]: this server's `Host`, a loopback or
//! allowed `Origin`, and the API key when one is set). Until then it has cost the server nothing
//! worth keeping — no request of it reached a handler — so untrusted connections are the ones
//! that make room:
//!
//! - at most [`ServeLimits::max_connections`] connections are open;
//! - at most `max_connections - reserved_connections` of them are untrusted, so the reserved
//!   slots can only be held by trusted connections;
//! - at most [`ServeLimits::max_connections_per_ip`] untrusted connections come from one
//!   address (an IPv6 client counts by its /64);
//! - a new connection that would break one of these caps *evicts* the oldest untrusted
//!   connection in its way (of its own address for the per-address cap, of anyone otherwise)
//!   instead of being turned away. It is closed at accept only when every open connection is
//!   trusted.
//!
//! Evicting the oldest rather than refusing the newest is what defeats idle and slowloris
//! sockets: an attacker cannot hold untrusted slots, because every newer connection pushes its
//! oldest ones out, and the reserved slots stay free for trusted ones. A legitimate client's
//! request is normally in the socket buffer before the server accepts the connection, so the
//! first read yields a whole head and the connection is trusted at once; it would have to wait
//! for `max_connections_per_ip` newer connections from its own address (or the whole untrusted
//! pool from anyone) before losing its slot. That is also the limit of this defence: an
//! attacker who opens connections faster than that, from the legitimate client's own address,
//! can still push a slow client out before its request head arrives. The per-address cap
//! (256 of the 448 untrusted slots by default) keeps one address from taking the whole pool
//! while leaving a client that shares an address with attackers that many newer connections of
//! margin; it never refuses a connection by itself. Trusted connections are never
//! evicted; they leave when their keep-alive idle time ([`ServeLimits::header_timeout`]) runs
//! out, like every connection waiting for a request head.
//!
//! [`ServeLimits::max_connections`]: super::ServeLimits::max_connections
//! [`ServeLimits::max_connections_per_ip`]: super::ServeLimits::max_connections_per_ip
//! [`ServeLimits::header_timeout`]: super::ServeLimits::header_timeout

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use super::{ServeLimits, Stats};

/// The key a client's connections are counted under: an IPv4 address, or an IPv6 /64.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let mut seg = v6.segments();
            seg[4..].fill(0);
            IpAddr::V6(seg.into())
        }
        v4 => v4,
    }
}

struct Entry {
    client: IpAddr,
    trusted: bool,
    evict: Option<oneshot::Sender<()>>,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    open: HashMap<u64, Entry>,
    /// Untrusted connections by id (ids grow, so the first is the oldest).
    untrusted: BTreeSet<u64>,
    /// Untrusted connections per client.
    per_client: HashMap<IpAddr, BTreeSet<u64>>,
}

impl Inner {
    fn forget_untrusted(&mut self, id: u64, client: IpAddr) {
        self.untrusted.remove(&id);
        if let Some(set) = self.per_client.get_mut(&client) {
            set.remove(&id);
            if set.is_empty() {
                self.per_client.remove(&client);
            }
        }
    }

    /// Which of `ids` (untrusted, oldest first) gives way: the oldest.
    fn victim(ids: &BTreeSet<u64>) -> Option<u64> {
        ids.first().copied()
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.open.remove(&id)?;
        if !e.trusted {
            self.forget_untrusted(id, e.client);
        }
        Some(e)
    }

    /// Close connection `id` (its task ends when it gets the message).
    fn evict(&mut self, id: u64) {
        if let Some(mut e) = self.remove(id) {
            if let Some(tx) = e.evict.take() {
                let _ = tx.send(());
            }
        }
    }
}

/// The open connections and their caps.
pub(crate) struct ConnTable {
    inner: Mutex<Inner>,
    max_open: usize,
    max_untrusted: usize,
    max_untrusted_per_client: usize,
    stats: Arc<Stats>,
}

/// What [`ConnTable::admit`] decided.
pub(crate) enum Admission {
    /// Serve it; the receiver fires when the connection is evicted.
    Open(Slot, oneshot::Receiver<()>),
    /// Every open connection is trusted: close it.
    Refused,
}

/// A connection's place in the table, freed when dropped.
pub(crate) struct Slot {
    conn: ConnId,
}

impl Slot {
    /// The handle requests of this connection carry.
    pub(crate) fn id(&self) -> ConnId {
        self.conn.clone()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.conn.table.lock().remove(self.conn.id);
    }
}

/// A connection, as its requests see it (in their extensions).
#[derive(Clone)]
pub(crate) struct ConnId {
    table: Arc<ConnTable>,
    id: u64,
}

impl ConnId {
    /// A request of this connection passed the header guard: it may keep its slot.
    pub(crate) fn trust(&self) {
        let mut g = self.table.lock();
        let client = match g.open.get_mut(&self.id) {
            Some(e) if !e.trusted => {
                e.trusted = true;
                e.client
            }
            _ => return,
        };
        g.forget_untrusted(self.id, client);
    }
}

impl ConnTable {
    /// A table under `limits` (caps below 1 count as 1; the reserve leaves at least one
    /// untrusted slot).
    pub(crate) fn new(limits: &ServeLimits, stats: Arc<Stats>) -> Arc<Self> {
        let max_open = limits.max_connections.max(1);
        let max_untrusted = max_open.saturating_sub(limits.reserved_connections).max(1);
        Arc::new(Self {
            inner: Mutex::new(Inner::default()),
            max_open,
            max_untrusted,
            max_untrusted_per_client: limits.max_connections_per_ip.clamp(1, max_untrusted),
            stats,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The table stays consistent across a panic elsewhere (every update is complete before
        // anything can panic), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make room for a new connection from `peer` (evicting the oldest untrusted ones that
    /// stand in its way) or refuse it.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Admission {
        let client = client_key(peer);
        let mut g = self.lock();
        let mut evicted = 0u64;
        let own = g
            .per_client
            .get(&client)
            .filter(|own| own.len() >= self.max_untrusted_per_client)
            .and_then(Inner::victim);
        if let Some(id) = own {
            g.evict(id);
            evicted += 1;
        }
        while g.untrusted.len() >= self.max_untrusted || g.open.len() >= self.max_open {
            let Some(id) = Inner::victim(&g.untrusted) else {
                break;
            };
            g.evict(id);
            evicted += 1;
        }
        Stats::add(&self.stats.connections_evicted, evicted);
        if g.open.len() >= self.max_open {
            Stats::add(&self.stats.connections_refused, 1);
            return Admission::Refused;
        }
        let id = g.next_id;
        g.next_id += 1;
        let (tx, rx) = oneshot::channel();
        g.open.insert(
            id,
            Entry {
                client,
                trusted: false,
                evict: Some(tx),
            },
        );
        g.untrusted.insert(id);
        g.per_client.entry(client).or_default().insert(id);
        Admission::Open(
            Slot {
                conn: ConnId {
                    table: Arc::clone(self),
                    id,
                },
            },
            rx,
        )
    }

    /// (open, untrusted) now.
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let g = self.lock();
        (g.open.len(), g.untrusted.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(max: usize, reserved: usize, per_ip: usize) -> (Arc<ConnTable>, Arc<Stats>) {
        let stats = Arc::new(Stats::default());
        let limits = ServeLimits {
            max_connections: max,
            reserved_connections: reserved,
            max_connections_per_ip: per_ip,
            ..ServeLimits::default()
        };
        (ConnTable::new(&limits, Arc::clone(&stats)), stats)
    }

    fn open(t: &Arc<ConnTable>, ip: &str) -> (Slot, oneshot::Receiver<()>) {
        match t.admit(ip.parse().expect("ip")) {
            Admission::Open(s, rx) => (s, rx),
            Admission::Refused => panic!("refused {ip}"),
        }
    }

    #[test]
    fn a_new_connection_evicts_the_oldest_untrusted_one_of_its_address() {
        let (t, stats) = table(100, 10, 3);
        let mut a: Vec<_> = (0..3).map(|_| open(&t, "10.0.0.1")).collect();
        let _b = open(&t, "10.0.0.2");
        assert_eq!(t.counts(), (4, 4));
        let _a4 = open(&t, "10.0.0.1");
        // The first of 10.0.0.1's is told to close and has left the table.
        assert_eq!(a[0].1.try_recv(), Ok(()));
        assert!(a[1].1.try_recv().is_err());
        assert_eq!(t.counts(), (4, 4));
        assert_eq!(stats.snapshot().connections_evicted, 1);
        // Dropping the evicted slot later changes nothing.
        drop(a.remove(0));
        assert_eq!(t.counts(), (4, 4));
    }

    #[test]
    fn reserved_slots_are_for_trusted_connections_and_a_full_trusted_table_refuses() {
        let (t, stats) = table(4, 2, 4);
        // Two trusted connections.
        let trusted: Vec<_> = (0..2).map(|_| open(&t, "127.0.0.1")).collect();
        for (s, _) in &trusted {
            s.id().trust();
        }
        // Two untrusted fill the unreserved part; a third evicts the oldest of them.
        let mut u1 = open(&t, "127.0.0.1");
        let u2 = open(&t, "::ffff:127.0.0.1");
        assert_eq!(t.counts(), (4, 2));
        let u3 = open(&t, "10.1.1.1");
        assert_eq!(u1.1.try_recv(), Ok(()));
        assert_eq!(t.counts(), (4, 2));
        // Once every slot is trusted, a new connection is refused.
        u3.0.id().trust();
        u2.0.id().trust();
        assert!(matches!(
            t.admit("10.9.9.9".parse().expect("ip")),
            Admission::Refused
        ));
        assert_eq!(stats.snapshot().connections_refused, 1);
        // A trusted connection that leaves frees its slot.
        drop(trusted);
        assert_eq!(t.counts(), (2, 0));
        let _n = open(&t, "10.9.9.9");
        assert_eq!(t.counts(), (3, 1));
    }

    #[test]
    fn ipv6_clients_count_by_their_64_prefix() {
        let (t, _) = table(100, 0, 2);
        let mut a = open(&t, "2001:db8::1");
        let _b = open(&t, "2001:db8::2:3");
        let _c = open(&t, "2001:db8:0:1::1");
        assert!(a.1.try_recv().is_err(), "another /64");
        let _d = open(&t, "2001:db8::ffff");
        assert_eq!(a.1.try_recv(), Ok(()), "same /64, oldest goes");
    }
}
