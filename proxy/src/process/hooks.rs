//! The process's shared state ([`Shared`]) as the layers below the session see it: each
//! names what it needs as a trait of its own, so that none of them imports the session.

use std::sync::Arc;

use super::Shared;
use crate::runtime::Runtime;
use crate::xa::Xa;

impl crate::xa::recovery::Process for Shared {
    fn xa(&self) -> &Arc<Xa> {
        &self.xa
    }

    fn runtime(&self) -> Arc<Runtime> {
        self.runtime.load_full()
    }

    fn shutdown(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.clone()
    }
}

impl crate::reload::Process for Shared {
    fn runtime(&self) -> &arc_swap::ArcSwap<Runtime> {
        &self.runtime
    }

    fn reloader(&self) -> Option<&crate::reload::Reloader> {
        self.reloader.as_ref()
    }

    fn reload_lock(&self) -> &tokio::sync::Mutex<()> {
        &self.reload_lock
    }

    fn server_version(&self) -> &[u8] {
        &self.server_version
    }

    fn observer(&self) -> &crate::observe::Observer {
        &self.observe
    }

    fn monitors(&self) -> &std::sync::Mutex<Vec<tokio::task::AbortHandle>> {
        &self.monitors
    }

    fn xa(&self) -> &Xa {
        &self.xa
    }

    fn users_changed(&self) {
        self.sha2_cache.clear();
    }
}
