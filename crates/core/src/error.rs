//! One error vocabulary for the whole server.
//!
//! Every failure that can reach a client is an [`Error`] with a [`ErrorKind`] (what happened) and a
//! [`Side`] (whose fault it is: the downstream client, the upstream server, or sluice itself). The
//! HTTP status a failure becomes is decided in exactly one place, [`Error::status`], so the mapping
//! cannot drift between features.

use std::fmt;

use http::StatusCode;

/// The boxed error type that bodies and I/O layers pass around.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Who caused a failure. Logged with every error; decides 4xx versus 5xx.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client that sent the request.
    Downstream,
    /// The server sluice forwarded the request to.
    Upstream,
    /// sluice itself (file system, configuration, a bug).
    Internal,
}

/// What went wrong. Each kind maps to one status in [`Error::status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request is malformed (bad path encoding, bad header value...).
    BadRequest,
    /// The request path tries to leave the served root.
    Forbidden,
    /// Nothing is there.
    NotFound,
    /// The method is not allowed for this route.
    MethodNotAllowed,
    /// The client stopped sending its request (body) for longer than allowed.
    RequestTimeout,
    /// A `Range` header that cannot be satisfied for this representation.
    RangeNotSatisfiable,
    /// The request body is larger than allowed.
    PayloadTooLarge,
    /// The request body uses a content coding sluice does not decode.
    UnsupportedMediaType,
    /// The client sent more requests than the route's rate limit allows.
    TooManyRequests,
    /// The upstream could not be reached or answered with garbage.
    BadGateway,
    /// The upstream took too long.
    GatewayTimeout,
    /// No route matched or the service is shutting down.
    Unavailable,
    /// An I/O failure on sluice's side (reading a file that vanished...).
    Io,
}

/// A failure with its kind, side and cause.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    side: Side,
    message: String,
    source: Option<BoxError>,
}

impl Error {
    /// A new error; `message` is what the log line and (for 4xx) the client see.
    pub fn new(kind: ErrorKind, side: Side, message: impl Into<String>) -> Self {
        Self {
            kind,
            side,
            message: message.into(),
            source: None,
        }
    }

    /// A client mistake.
    pub fn downstream(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self::new(kind, Side::Downstream, message)
    }

    /// A failure of sluice itself.
    pub fn internal(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self::new(kind, Side::Internal, message)
    }

    /// Attach the underlying cause.
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn side(&self) -> Side {
        self.side
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The HTTP status this error becomes: the one place where that is decided.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorKind::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorKind::RangeNotSatisfiable => StatusCode::RANGE_NOT_SATISFIABLE,
            ErrorKind::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorKind::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
            ErrorKind::BadGateway => StatusCode::BAD_GATEWAY,
            ErrorKind::GatewayTimeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Io => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        let kind = match err.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::PermissionDenied => ErrorKind::Forbidden,
            _ => ErrorKind::Io,
        };
        Error::new(kind, Side::Internal, "i/o error").with_source(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_maps_to_its_status() {
        let e = Error::downstream(ErrorKind::RangeNotSatisfiable, "bad range");
        assert_eq!(e.status(), StatusCode::RANGE_NOT_SATISFIABLE);
        assert_eq!(e.side(), Side::Downstream);
        let io: Error = std::io::Error::from(std::io::ErrorKind::NotFound).into();
        assert_eq!(io.status(), StatusCode::NOT_FOUND);
        assert_eq!(io.to_string(), "i/o error: entity not found");
    }
}
