//! The replication position that covers a session's writes on one datahost.
//!
//! A statement split over two datanodes of one datahost commits on two connections at once,
//! and their GTIDs reach the session in the order the responses are read, not the order the
//! server committed them. Keeping only the last one noted would let a causal read wait for
//! the earlier commit and miss the later one. The position kept is, per replication stream
//! (MariaDB's domain, MySQL's source UUID), the highest sequence number seen: a replica
//! applies one stream in commit order (MariaDB always; MySQL with
//! `replica_preserve_commit_order`, its default), so reaching it means every write before it
//! is applied too.

/// The position covering both `old` and `new` (GTID lists as the server reports them:
/// MariaDB `domain-server-seq`, MySQL `uuid:seq`, comma separated).
pub fn covering(old: &str, new: &str) -> String {
    let mut kept: Vec<(&str, u64, &str)> = Vec::new();
    for entry in old.split(',').chain(new.split(',')) {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let Some((stream, seq)) = stream_and_seq(entry) else {
            // Not a form we read: wait for it as reported, next to the rest.
            if !kept.iter().any(|(_, _, e)| *e == entry) {
                kept.push((entry, 0, entry));
            }
            continue;
        };
        match kept.iter_mut().find(|(s, _, _)| *s == stream) {
            Some(k) if k.1 < seq => *k = (stream, seq, entry),
            Some(_) => {}
            None => kept.push((stream, seq, entry)),
        }
    }
    let entries: Vec<&str> = kept.iter().map(|&(_, _, entry)| entry).collect();
    entries.join(",")
}

/// An entry's stream and sequence number: `0-1-42` is stream `0` at 42 (MariaDB: domain,
/// server, sequence), `3E11FA47-...:42` or `3E11FA47-...:1-42` stream `3E11FA47-...` at 42.
fn stream_and_seq(entry: &str) -> Option<(&str, u64)> {
    if let Some((uuid, seqs)) = entry.split_once(':') {
        let last = seqs.rsplit([':', '-']).next()?;
        return Some((uuid, last.parse().ok()?));
    }
    let mut parts = entry.splitn(3, '-');
    let (domain, server, seq) = (parts.next()?, parts.next()?, parts.next()?);
    domain.parse::<u32>().ok()?;
    server.parse::<u32>().ok()?;
    Some((domain, seq.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::covering;

    #[test]
    fn the_highest_sequence_of_each_mariadb_domain_is_kept_whatever_the_order() {
        assert_eq!(covering("0-1-12", "0-1-11"), "0-1-12");
        assert_eq!(covering("0-1-11", "0-1-12"), "0-1-12");
        assert_eq!(covering("0-1-11", "1-1-3"), "0-1-11,1-1-3");
        assert_eq!(covering("0-1-11,1-1-3", "1-1-2,0-2-15"), "0-2-15,1-1-3");
    }

    #[test]
    fn mysql_sets_keep_the_highest_transaction_of_each_source() {
        let a = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
        let b = "4f22ab58-71ca-11e1-9e33-c80aa9429562";
        assert_eq!(
            covering(&format!("{a}:7"), &format!("{a}:5")),
            format!("{a}:7")
        );
        assert_eq!(
            covering(&format!("{a}:1-5"), &format!("{b}:9")),
            format!("{a}:1-5,{b}:9")
        );
    }

    #[test]
    fn unreadable_entries_are_all_waited_for() {
        assert_eq!(covering("x", "y"), "x,y");
        assert_eq!(covering("x", "x"), "x");
    }
}
