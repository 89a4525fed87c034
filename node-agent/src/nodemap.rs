//! Which instance carries which Slurm node, kept by the agent in its state directory (on the
//! head node's state volume, so it outlives the head): resume records a launch's nodes in one
//! write, suspend and the sweep read it and drop what they end.
//!
//! It replaces a per-instance `hpcforge:node` tag, which cost one CreateTags call per node
//! (EC2 takes one tag value per call: 1,000 calls for 1,000 nodes). Instances an older agent
//! launched keep their tag and are still found by it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use hpc_aws::ec2::InstanceInfo;
use hpc_desired_state::tag;
use serde::{Deserialize, Serialize};

use crate::statefile;

/// The instance carrying a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carrier {
    pub instance_id: String,
    /// When resume recorded it (unix seconds).
    pub recorded_at: u64,
    /// Where resume launched it from; None in an older agent's records. It lets an interrupted
    /// spot pool cool down after EC2 stopped listing the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

/// The capacity pool a node's instance was launched from: the cool-down key's parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub partition: String,
    /// The pool's index in the partition's published pools.
    pub pool: usize,
    pub instance_type: String,
}

/// Node name → the instance carrying it.
pub type Carriers = BTreeMap<String, Carrier>;

/// The map's file in the agent's state directory, whose lock serialises the map's writers
/// (Slurm runs several resume and suspend programs at once, as SlurmUser; the sweep runs as
/// root: a lock on the directory needs no file either may fail to open).
#[derive(Debug, Clone)]
pub struct NodeMap {
    dir: PathBuf,
    path: PathBuf,
}

impl NodeMap {
    pub fn at(state_dir: &Path) -> Self {
        NodeMap {
            dir: state_dir.to_path_buf(),
            path: state_dir.join("nodes.json"),
        }
    }

    /// The map as last written (none yet: empty).
    pub fn read(&self) -> io::Result<Carriers> {
        let _lock = self.locked()?;
        self.load()
    }

    /// Changes the map under the lock and writes it back atomically; returns what `change` does.
    pub fn update<R>(&self, change: impl FnOnce(&mut Carriers) -> R) -> io::Result<R> {
        let _lock = self.locked()?;
        let mut map = self.load()?;
        let out = change(&mut map);
        statefile::write_atomic(&self.path, &serde_json::to_vec(&map).map_err(io::Error::other)?)?;
        Ok(out)
    }

    fn load(&self) -> io::Result<Carriers> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| io::Error::other(format!("{} is not a node map: {e}", self.path.display()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Carriers::new()),
            Err(e) => Err(e),
        }
    }

    fn locked(&self) -> io::Result<File> {
        statefile::lock_dir(&self.dir)
    }
}

/// Instance id → node, for finding the node an instance carries.
pub fn by_instance(map: &Carriers) -> BTreeMap<&str, &str> {
    map.iter()
        .map(|(node, c)| (c.instance_id.as_str(), node.as_str()))
        .collect()
}

/// The node `instance` carries: the map's record, else its tag (an older agent's launch).
pub fn node_of<'a>(by_instance: &BTreeMap<&str, &'a str>, instance: &'a InstanceInfo) -> Option<&'a str> {
    by_instance
        .get(instance.id.as_str())
        .copied()
        .or_else(|| instance.tag(tag::NODE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_are_kept_and_instances_lead_back_to_their_nodes() {
        let dir = std::env::temp_dir().join(format!("hpc-node-nodemap-{}", std::process::id()));
        let map = NodeMap::at(&dir);
        assert!(map.read().expect("empty").is_empty());
        map.update(|m| {
            m.insert(
                "gpu-1".into(),
                Carrier {
                    instance_id: "i-1".into(),
                    recorded_at: 5,
                    origin: None,
                },
            )
        })
        .expect("write");
        let read = map.read().expect("read");
        assert_eq!(read["gpu-1"].instance_id, "i-1");
        let index = by_instance(&read);
        let instance = |id: &str, tags: &[(&str, &str)]| InstanceInfo {
            id: id.into(),
            state: "running".into(),
            instance_type: "p5.48xlarge".into(),
            tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            launched_at: 0,
            ..InstanceInfo::default()
        };
        let mapped = instance("i-1", &[]);
        let tagged = instance("i-2", &[(tag::NODE, "gpu-2")]);
        let neither = instance("i-3", &[]);
        assert_eq!(node_of(&index, &mapped), Some("gpu-1"));
        assert_eq!(node_of(&index, &tagged), Some("gpu-2"));
        assert_eq!(node_of(&index, &neither), None);
        // An older agent's record, without an origin, still reads.
        std::fs::write(
            dir.join("nodes.json"),
            r#"{"gpu-3":{"instance_id":"i-3","recorded_at":7}}"#,
        )
        .expect("old map");
        assert_eq!(map.read().expect("old map")["gpu-3"].origin, None);
        std::fs::write(dir.join("nodes.json"), "{").expect("corrupt");
        assert!(map.read().is_err(), "a damaged map is an error, not an empty map");
        let _ = std::fs::remove_dir_all(dir);
    }
}
