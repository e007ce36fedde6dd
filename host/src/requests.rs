//! Requests to the API server whose responses are read as text, for a reader that parses only
//! what it needs (the applier's writes) or nothing but the status (Events): kube's `Api`
//! methods decode the whole returned object into a typed value. Used by [`crate::reconcile`]
//! and [`crate::observe`].

/// Builds a request against a resource's URL, as `kube::core::Request`'s methods do.
pub trait BuildRequest:
    FnOnce(&kube::core::Request) -> Result<http::Request<Vec<u8>>, kube::core::request::Error>
{
}

impl<F> BuildRequest for F where
    F: FnOnce(&kube::core::Request) -> Result<http::Request<Vec<u8>>, kube::core::request::Error>
{
}

/// Sends the request `build` makes against the resource at `url` with `client`, and returns
/// the response's body as text, for a reader that parses only what it needs (or nothing but the
/// status). `verb` names the request for the client's tracing, as `Api`'s methods do.
pub async fn send_text(
    client: &kube::Client,
    url: &str,
    verb: &'static str,
    build: impl BuildRequest,
) -> Result<String, kube::Error> {
    let mut request = build(&kube::core::Request::new(url)).map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert(verb);
    client.request_text(request).await
}
