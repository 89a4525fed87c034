//! Running as a Terraform plugin: the go-plugin handshake, AutoMTLS, and the gRPC services.
//!
//! Terraform starts the provider with a magic cookie and the protocol versions it speaks
//! in the environment, and (AutoMTLS) its own client certificate in PLUGIN_CLIENT_CERT.
//! The provider listens on loopback, prints one handshake line on stdout
//! (`1|6|tcp|127.0.0.1:PORT|grpc|<server cert, base64 DER>`) and serves until Terraform
//! calls GRPCController.Shutdown.

use std::io::Write as _;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use base64::Engine as _;
use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tonic::transport::server::Connected;
use tonic::{Request, Response, Status, Streaming};

use crate::proto::health::health_server::{Health, HealthServer};
use crate::proto::health::{health_check_response::ServingStatus, HealthCheckRequest, HealthCheckResponse};
use crate::proto::plugin::grpc_broker_server::{GrpcBroker, GrpcBrokerServer};
use crate::proto::plugin::grpc_controller_server::{GrpcController, GrpcControllerServer};
use crate::proto::plugin::grpc_stdio_server::{GrpcStdio, GrpcStdioServer};
use crate::proto::plugin::{ConnInfo, Empty, StdioData};
use crate::proto::tfplugin6::provider_server::ProviderServer;
use crate::resource::Provider;
use crate::server::ProviderService;
use crate::tls;

/// The cookie Terraform sets so a provider knows it was started by Terraform.
pub const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
pub const MAGIC_COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";
const APP_PROTOCOL: u32 = 6;
const CORE_PROTOCOL: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "This binary is a Terraform plugin ({name}). It is not meant to be run directly.\n\
         Use it through Terraform: add the provider to required_providers and run `terraform init` and `terraform plan`.\n\
         (For development, point a dev_overrides block of a Terraform CLI config file at its folder.)"
    )]
    NotUnderTerraform { name: String },
    #[error("Terraform offered plugin protocol versions {offered:?}; this provider speaks only protocol 6. Use Terraform 1.0 or newer.")]
    NoCommonProtocol { offered: String },
    #[error("setting up TLS with Terraform: {0}")]
    Tls(String),
    #[error("listening on loopback: {0}")]
    Listen(std::io::Error),
    #[error("writing the handshake: {0}")]
    Handshake(std::io::Error),
    #[error("gRPC server: {0}")]
    Grpc(String),
}

/// The handshake line Terraform reads from stdout.
pub fn handshake_line(addr: SocketAddr, server_cert_der: Option<&[u8]>) -> String {
    let cert = server_cert_der
        .map(|der| base64::engine::general_purpose::STANDARD_NO_PAD.encode(der))
        .unwrap_or_default();
    format!("{CORE_PROTOCOL}|{APP_PROTOCOL}|tcp|{addr}|grpc|{cert}")
}

/// Checks the environment Terraform sets up. `name` is the provider's name for messages.
pub fn check_environment(name: &str, env: impl Fn(&str) -> Option<String>) -> Result<(), ServeError> {
    if env(MAGIC_COOKIE_KEY).as_deref() != Some(MAGIC_COOKIE_VALUE) {
        return Err(ServeError::NotUnderTerraform { name: name.to_string() });
    }
    if let Some(offered) = env("PLUGIN_PROTOCOL_VERSIONS") {
        if !offered.split(',').any(|v| v.trim() == APP_PROTOCOL.to_string()) {
            return Err(ServeError::NoCommonProtocol { offered });
        }
    }
    Ok(())
}

/// Runs `provider` as a Terraform plugin until Terraform shuts it down.
pub async fn serve(name: &str, provider: Arc<dyn Provider>) -> Result<(), ServeError> {
    check_environment(name, |k| std::env::var(k).ok())?;

    let tls = match std::env::var("PLUGIN_CLIENT_CERT") {
        Ok(pem) if !pem.trim().is_empty() => Some(tls::server_config(&pem).map_err(ServeError::Tls)?),
        _ => None,
    };

    let listener = bind().await?;
    let addr = listener.local_addr().map_err(ServeError::Listen)?;

    let (shutdown_tx, mut shutdown_rx) = watch::channel(false);
    let (stop_tx, _) = watch::channel(false);
    let service = ProviderService::new(provider, stop_tx);

    let (conn_tx, conn_rx) = mpsc::channel::<Result<PluginConn, std::io::Error>>(16);
    let acceptor = tls.as_ref().map(|t| tokio_rustls::TlsAcceptor::from(t.config.clone()));
    tokio::spawn(accept_loop(listener, acceptor, conn_tx));

    // Terraform sends SIGINT to the whole process group on Ctrl-C and then asks us to stop
    // over gRPC; exiting on the signal would leave half-done work unrecorded.
    tokio::spawn(async {
        loop {
            if tokio::signal::ctrl_c().await.is_err() {
                break;
            }
            tracing::debug!("ignoring interrupt: waiting for Terraform to stop the provider");
        }
    });

    let line = handshake_line(addr, tls.as_ref().map(|t| t.cert_der.as_slice()));
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").map_err(ServeError::Handshake)?;
        out.flush().map_err(ServeError::Handshake)?;
    }
    tracing::debug!(%addr, mtls = tls.is_some(), "plugin serving");

    let controller = Controller { shutdown: shutdown_tx };
    let shutdown = async move {
        while !*shutdown_rx.borrow_and_update() {
            if shutdown_rx.changed().await.is_err() {
                break;
            }
        }
    };
    tonic::transport::Server::builder()
        .add_service(ProviderServer::new(service).max_decoding_message_size(256 * 1024 * 1024))
        .add_service(GrpcControllerServer::new(controller))
        .add_service(GrpcStdioServer::new(Stdio))
        .add_service(GrpcBrokerServer::new(Broker))
        .add_service(HealthServer::new(HealthCheck))
        .serve_with_incoming_shutdown(tokio_stream::wrappers::ReceiverStream::new(conn_rx), shutdown)
        .await
        .map_err(|e| ServeError::Grpc(e.to_string()))
}

async fn bind() -> Result<TcpListener, ServeError> {
    let min: u16 = std::env::var("PLUGIN_MIN_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let max: u16 = std::env::var("PLUGIN_MAX_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    if min > 0 && max >= min {
        let mut last = None;
        for port in min..=max {
            match TcpListener::bind(("127.0.0.1", port)).await {
                Ok(l) => return Ok(l),
                Err(e) => last = Some(e),
            }
        }
        return Err(ServeError::Listen(
            last.unwrap_or_else(|| std::io::Error::other("no port in range")),
        ));
    }
    TcpListener::bind(("127.0.0.1", 0)).await.map_err(ServeError::Listen)
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    tx: mpsc::Sender<Result<PluginConn, std::io::Error>>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                continue;
            }
        };
        // Without this every small gRPC message waits for Nagle's algorithm (~40 ms a call).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::warn!("TCP_NODELAY: {e}");
        }
        let tx = tx.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let conn = match acceptor {
                None => PluginConn(Box::pin(stream)),
                Some(a) => match a.accept(stream).await {
                    Ok(tls) => PluginConn(Box::pin(tls)),
                    Err(e) => {
                        tracing::warn!(%peer, "TLS handshake with Terraform failed: {e}");
                        return;
                    }
                },
            };
            let _ = tx.send(Ok(conn)).await;
        });
    }
}

trait Io: AsyncRead + AsyncWrite + Send + 'static {}
impl Io for TcpStream {}
impl Io for tokio_rustls::server::TlsStream<TcpStream> {}

/// One accepted connection, plain or TLS.
struct PluginConn(Pin<Box<dyn Io>>);

impl Connected for PluginConn {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for PluginConn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        self.0.as_mut().poll_read(cx, buf)
    }
}

impl AsyncWrite for PluginConn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.0.as_mut().poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.0.as_mut().poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.0.as_mut().poll_shutdown(cx)
    }
}

struct Controller {
    shutdown: watch::Sender<bool>,
}

#[tonic::async_trait]
impl GrpcController for Controller {
    async fn shutdown(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        tracing::debug!("Terraform shut the plugin down");
        let _ = self.shutdown.send(true);
        Ok(Response::new(Empty {}))
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// We log to stderr, which Terraform reads directly; the forwarded stdio stream stays idle.
struct Stdio;

#[tonic::async_trait]
impl GrpcStdio for Stdio {
    type StreamStdioStream = BoxStream<StdioData>;
    async fn stream_stdio(&self, _: Request<Empty>) -> Result<Response<Self::StreamStdioStream>, Status> {
        Ok(Response::new(Box::pin(futures::stream::pending())))
    }
}

/// Providers never dial back through the broker; the stream is accepted and left idle.
struct Broker;

#[tonic::async_trait]
impl GrpcBroker for Broker {
    type StartStreamStream = BoxStream<ConnInfo>;
    async fn start_stream(&self, _: Request<Streaming<ConnInfo>>) -> Result<Response<Self::StartStreamStream>, Status> {
        Ok(Response::new(Box::pin(futures::stream::pending())))
    }
}

struct HealthCheck;

#[tonic::async_trait]
impl Health for HealthCheck {
    async fn check(&self, _: Request<HealthCheckRequest>) -> Result<Response<HealthCheckResponse>, Status> {
        Ok(Response::new(HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn refuses_to_run_without_terraform() {
        let err = check_environment("hpcforge/hpc", env(&[])).expect_err("no cookie");
        let msg = err.to_string();
        assert!(
            msg.contains("not meant to be run directly") && msg.contains("terraform init"),
            "{msg}"
        );
        let wrong = check_environment("x", env(&[(MAGIC_COOKIE_KEY, "nope")]));
        assert!(matches!(wrong, Err(ServeError::NotUnderTerraform { .. })));
    }

    #[test]
    fn negotiates_protocol_6() {
        assert!(check_environment(
            "x",
            env(&[
                (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
                ("PLUGIN_PROTOCOL_VERSIONS", "5,6")
            ])
        )
        .is_ok());
        assert!(check_environment("x", env(&[(MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE)])).is_ok());
        let err = check_environment(
            "x",
            env(&[
                (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
                ("PLUGIN_PROTOCOL_VERSIONS", "4,5"),
            ]),
        )
        .expect_err("no 6");
        assert!(err.to_string().contains("\"4,5\""), "{err}");
    }

    #[test]
    fn handshake_line_has_the_go_plugin_shape() {
        let addr: SocketAddr = "127.0.0.1:4321".parse().expect("addr");
        assert_eq!(handshake_line(addr, None), "1|6|tcp|127.0.0.1:4321|grpc|");
        let line = handshake_line(addr, Some(&[0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(line, "1|6|tcp|127.0.0.1:4321|grpc|3q2+7w");
    }
}
