//! `sluice demo`: two demo origins and a caching, balancing proxy in front of them.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Args;
use sluice_config::{
    Action, Compress, Listener, PathMatch, Proxy, Route, Upstream, UpstreamAddress, UpstreamServer,
};
use sluice_server::ops::lifecycle::{fail, with_runtime};

use crate::CommonArgs;
use crate::origin::signalled;
use crate::quick::quick_config;

#[derive(Args)]
pub struct DemoArgs {
    /// Address of the proxy.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address of the admin listener (Prometheus /metrics).
    #[arg(long, default_value = "127.0.0.1:9901")]
    pub admin: SocketAddr,
    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn run(args: DemoArgs) -> ExitCode {
    let (level, workers) = (args.common.log_level.clone(), args.common.workers);
    with_runtime(&level, workers, |mut signals, workers| async move {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut servers = Vec::new();
        for name in ["origin-a", "origin-b"] {
            let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                Ok(l) => l,
                Err(e) => return fail(&format!("starting the demo origin: {e}")),
            };
            let Ok(addr) = listener.local_addr() else {
                return fail("starting the demo origin: no local address");
            };
            let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions {
                name: Some(name.into()),
            });
            tokio::spawn(origin.serve_tcp(listener, signalled(stopped.clone())));
            servers.push(UpstreamServer::new(UpstreamAddress::Tcp(addr.to_string())));
        }
        let route = Route {
            name: "demo".into(),
            hosts: Vec::new(),
            path: PathMatch::Prefix("/".into()),
            listeners: Vec::new(),
            matchers: Default::default(),
            access: Default::default(),
            action: Action::Proxy(Proxy::to("origins")),
            compress: Some(Compress::default()),
            cache: None,
            rate_limit: None,
            body: Default::default(),
            response_headers: None,
            dictionary: None,
        };
        // The date API is cached (the origin says `max-age=5`): curl it twice to see MISS,
        // then HIT, and once more after 5 s for a new MISS.
        let cached = Route {
            name: "demo-cached".into(),
            path: PathMatch::Exact("/what-date-is-it".into()),
            cache: Some(sluice_config::RouteCache::new("demo")),
            ..route.clone()
        };
        let mut config = quick_config(
            Listener::plain(args.listen),
            vec![cached, route],
            &args.common,
            true,
        );
        config.caches = vec![sluice_config::CacheZone::new("demo")];
        config.upstreams.push(Upstream::new("origins", servers));
        config.admin = Some(sluice_config::Admin {
            address: args.admin,
        });
        let server = match sluice_server::start_on(&config, workers).await {
            Ok(server) => server,
            Err(e) => return fail(&e.to_string()),
        };
        let proxy = server
            .listeners()
            .first()
            .map_or(args.listen, |l| l.address);
        println!();
        println!("sluice demo: a proxy on http://{proxy} balancing two demo origins (round robin)");
        println!("try:");
        println!("  curl -s http://{proxy}/what-date-is-it | head -c 200; echo");
        println!(
            "  curl -si http://{proxy}/what-date-is-it | grep -i x-cache  # MISS, then HIT for 5 s"
        );
        println!(
            "  curl -si http://{proxy}/hello | grep -i x-origin     # run twice: origin-a, origin-b"
        );
        println!("  curl -s -d name=sluice http://{proxy}/what-is-my-name | head -c 120; echo");
        println!(
            "  curl -s http://{}/metrics | grep sluice_requests_total",
            args.admin
        );
        println!(
            "  curl -X PURGE 'http://{}/cache/demo?key=http://{proxy}/what-date-is-it'",
            args.admin
        );
        println!("Ctrl-C stops it.");
        signals.stop("the demo has no config file to reload").await;
        let _ = stop.send(true);
        server.shutdown(config.server.shutdown_timeout).await;
        ExitCode::SUCCESS
    })
}
