//! `wasi:*@0.2` for plugins built for `wasm32-wasip2`, or for `wasm32-wasip1` and adapted (the
//! preview1 adapter imports exactly these interfaces): a deny-all context. No preopened
//! directories, no sockets and no name lookup, no environment, no arguments, empty stdin; wall
//! and monotonic clocks and random are allowed, so `std::time` and `getrandom` work. Stdout and
//! stderr become log lines of the plugin, tagged and throttled like the `log` import's.
//!
//! The context is built on a call's first WASI import, not per call: a plugin without WASI
//! imports (`wasm32-unknown-unknown`) never has one, and pays for an empty `Option` only.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::State;
use super::log::{MAX_TEXT, Throttle, admit};
use wasmctrl_core::sync::lock;

/// One call's WASI context and the resources (streams, pollables) the guest holds.
pub(crate) struct Wasi {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl Wasi {
    fn new(sink: &Arc<Sink>) -> Self {
        let mut builder = WasiCtxBuilder::new();
        // The builder starts with no preopens, environment or arguments and denies every socket
        // address; say so anyway, so a changed default cannot open the sandbox.
        builder
            .stdout(Output {
                sink: sink.clone(),
                stream: Stream::Stdout,
            })
            .stderr(Output {
                sink: sink.clone(),
                stream: Stream::Stderr,
            })
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        Self {
            ctx: builder.build(),
            table: ResourceTable::new(),
        }
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let (plugin, key, throttle) = (&self.plugin, &self.key, &self.log_throttle);
        let wasi = self.wasi.get_or_insert_with(|| {
            Box::new(Wasi::new(&Arc::new(Sink {
                plugin: plugin.clone(),
                key: key.clone(),
                throttle: throttle.clone(),
                lines: Mutex::new(Lines {
                    budget: super::LOG_LINES_PER_CALL,
                    stdout: Vec::new(),
                    stderr: Vec::new(),
                }),
            })))
        });
        WasiCtxView {
            ctx: &mut wasi.ctx,
            table: &mut wasi.table,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

/// Where one call's stdout and stderr go: split into lines, each logged with the plugin's name
/// and key. A line longer than the log import's limit is cut there; a partial last line is
/// logged when the call's store is dropped.
struct Sink {
    plugin: Arc<str>,
    key: String,
    throttle: Arc<Throttle>,
    lines: Mutex<Lines>,
}

struct Lines {
    /// Lines left for this call (stdout and stderr together).
    budget: u32,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Sink {
    fn write(&self, stream: Stream, bytes: &[u8]) {
        let mut lines = lock(&self.lines);
        let Lines {
            budget,
            stdout,
            stderr,
        } = &mut *lines;
        let buffer = match stream {
            Stream::Stdout => stdout,
            Stream::Stderr => stderr,
        };
        for &byte in bytes {
            if byte == b'\n' {
                self.emit(stream, budget, buffer);
            } else if buffer.len() < MAX_TEXT {
                buffer.push(byte);
            }
            // Bytes past MAX_TEXT of one line are dropped, as the log import clips.
        }
    }

    fn emit(&self, stream: Stream, budget: &mut u32, buffer: &mut Vec<u8>) {
        let line = String::from_utf8_lossy(buffer).into_owned();
        buffer.clear();
        if !admit(budget, &self.throttle, &self.plugin) {
            return;
        }
        let (plugin, key) = (&*self.plugin, &self.key);
        match stream {
            Stream::Stdout => {
                tracing::info!(
                    plugin.name = plugin,
                    object.key = key,
                    stream = "stdout",
                    "{line}"
                )
            }
            Stream::Stderr => {
                tracing::warn!(
                    plugin.name = plugin,
                    object.key = key,
                    stream = "stderr",
                    "{line}"
                )
            }
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let lines = self.lines.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut budget = lines.budget;
        let mut stdout = std::mem::take(&mut lines.stdout);
        let mut stderr = std::mem::take(&mut lines.stderr);
        for (stream, buffer) in [(Stream::Stdout, &mut stdout), (Stream::Stderr, &mut stderr)] {
            if !buffer.is_empty() {
                self.emit(stream, &mut budget, buffer);
            }
        }
    }
}

/// The guest's stdout or stderr: every write goes to the [`Sink`] at once, so it is always
/// ready and never blocks the guest.
#[derive(Clone)]
struct Output {
    sink: Arc<Sink>,
    stream: Stream,
}

impl IsTerminal for Output {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Output {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

/// Bytes the guest may write per `write` call (what `check-write` grants).
const WRITE_PERMIT: usize = 64 << 10;

#[wasmtime_wasi::async_trait]
impl OutputStream for Output {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.sink.write(self.stream, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Output {
    async fn ready(&mut self) {}
}

impl AsyncWrite for Output {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.sink.write(self.stream, buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// `wasi:io/poll` under the call's deadline. The epoch deadline interrupts wasm code only; a
/// guest blocked in a host call (a `sleep`, which WASI turns into a wait on a pollable) would
/// hold its instance and its permit past the deadline. This implementation, linked over
/// wasmtime-wasi's own, waits as it does but at most until the deadline, then fails the call
/// with [`crate::DeadlineExceeded`].
pub(crate) mod poll {
    use std::time::Instant;

    use wasmtime::component::{HasData, Resource, ResourceTable};
    use wasmtime_wasi::WasiView;
    use wasmtime_wasi::p2::DynPollable;
    use wasmtime_wasi::p2::bindings::io::poll as io;
    use wasmtime_wasi::p2::bindings::sync::io::poll as sync;

    use super::State;

    /// The pollables of one call, and when the call must end.
    pub(crate) struct Guarded<'a> {
        table: &'a mut ResourceTable,
        until: Instant,
    }

    pub(crate) struct Deadlined;

    impl HasData for Deadlined {
        type Data<'a> = Guarded<'a>;
    }

    fn guarded(state: &mut State) -> Guarded<'_> {
        let until = state.started + state.deadline;
        Guarded {
            table: state.ctx().table,
            until,
        }
    }

    /// Links `wasi:io/poll` over wasmtime-wasi's (which must be linked already).
    pub(crate) fn add_to_linker(
        linker: &mut wasmtime::component::Linker<State>,
    ) -> wasmtime::Result<()> {
        linker.allow_shadowing(true);
        let linked = sync::add_to_linker::<State, Deadlined>(linker, guarded);
        linker.allow_shadowing(false);
        linked
    }

    impl Guarded<'_> {
        /// `wait` run to completion, or the call's deadline, whichever comes first.
        fn within<T>(
            until: Instant,
            wait: impl Future<Output = wasmtime::Result<T>>,
        ) -> wasmtime::Result<T> {
            let left = until.saturating_duration_since(Instant::now());
            wasmtime_wasi::runtime::in_tokio(async {
                tokio::time::timeout(left, wait)
                    .await
                    .unwrap_or_else(|_| Err(wasmtime::Error::new(crate::DeadlineExceeded)))
            })
        }
    }

    impl sync::Host for Guarded<'_> {
        fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
            let until = self.until;
            Self::within(until, io::Host::poll(self.table, pollables))
        }
    }

    impl sync::HostPollable for Guarded<'_> {
        fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
            let until = self.until;
            Self::within(until, io::HostPollable::ready(self.table, pollable))
        }

        fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
            let until = self.until;
            Self::within(until, io::HostPollable::block(self.table, pollable))
        }

        fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
            io::HostPollable::drop(self.table, pollable)
        }
    }
}
