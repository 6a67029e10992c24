//! How the cache sends a request upstream on its own (background refreshes, a refetch after
//! an unusable 304): through the route's proxy, for the client whose request caused it.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{Request, Response};
use sluice_core::{Body, Error, ErrorKind};

/// Forwards one request upstream (the route's proxy, with the client it came from).
pub type Forward =
    Arc<dyn Fn(Request<Body>) -> BoxFuture<'static, Result<Response<Body>, Error>> + Send + Sync>;

/// A [`Forward`] through `proxy` for `client` (background refreshes).
pub fn forward_through(
    proxy: Arc<crate::features::proxy::ProxyHandler>,
    client: crate::shared::client::Client,
) -> Forward {
    Arc::new(move |request| {
        let proxy = proxy.clone();
        Box::pin(async move {
            let mut timing = crate::features::proxy::UpstreamTiming::default();
            proxy.handle(client, request, &mut timing).await
        })
    })
}

/// A [`Forward`] for a route without a proxy (never used: only proxy routes have a cache).
pub fn unreachable_forward() -> Forward {
    Arc::new(|_| {
        Box::pin(async {
            Err(Error::new(
                ErrorKind::BadGateway,
                sluice_core::Side::Internal,
                "this route has no upstream to ask",
            ))
        })
    })
}
