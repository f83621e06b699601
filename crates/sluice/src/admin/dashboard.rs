//! The web dashboard: one page, a script and a style sheet, built into the binary so
//! it works with no internet. They hold no data: the page asks for the admin token and
//! reads everything through the token-protected API.

use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};

const PAGE: &str = include_str!("dashboard/index.html");
const SCRIPT: &str = include_str!("dashboard/app.js");
const STYLE: &str = include_str!("dashboard/style.css");

/// Headers every asset gets: no framing by other sites, no sniffing, and a policy that
/// lets the page load only its own script and style and talk only to this server.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::CACHE_CONTROL, "no-cache"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'self'; style-src 'self'; \
                 connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
            ),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

pub async fn page() -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

pub async fn redirect() -> Redirect {
    Redirect::to("/dashboard")
}
