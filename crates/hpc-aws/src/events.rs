//! EC2's events about instances, routed to a queue: EventBridge rules on the region's default
//! bus send EC2's spot interruption warnings and its notices of instances stopping or ending
//! to one SQS queue, which the head node's agent reads (as Karpenter's interruption queue).
//!
//! A route is a queue and two rules named from one base name. Making one is idempotent (a
//! route made before, or half made by a killed apply, is completed, never doubled) and so is
//! removing one (what is already gone is skipped).

use aws_sdk_eventbridge::types::{RuleState, Target};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, QueueAttributeName};

use crate::error::{AwsError, Result};

/// EventBridge's detail type of EC2's two-minute spot interruption warning.
pub const SPOT_INTERRUPTION: &str = "EC2 Spot Instance Interruption Warning";
/// EventBridge's detail type of EC2's instance state changes.
pub const STATE_CHANGE: &str = "EC2 Instance State-change Notification";
/// The states an instance leaves service in: the only state changes a route carries.
pub const LEAVING_STATES: &[&str] = &["stopping", "stopped", "shutting-down", "terminated"];
/// Seconds a message is kept unread: an event older than this is of no use to anyone.
const RETENTION_S: u32 = 600;
/// The id of a rule's one target, the queue.
const TARGET_ID: &str = "queue";

/// One rule of a route: its name's suffix, what it lets through, and its event pattern.
struct RuleKind {
    suffix: &'static str,
    what: &'static str,
    pattern: fn() -> serde_json::Value,
}

const RULES: [RuleKind; 2] = [
    RuleKind {
        suffix: "spot",
        what: "spot interruption warnings",
        pattern: || serde_json::json!({"source": ["aws.ec2"], "detail-type": [SPOT_INTERRUPTION]}),
    },
    RuleKind {
        suffix: "state",
        what: "instances stopping or ending",
        pattern: || {
            serde_json::json!({
                "source": ["aws.ec2"],
                "detail-type": [STATE_CHANGE],
                "detail": {"state": LEAVING_STATES},
            })
        },
    },
];

/// The names of a route's parts, from its base name.
pub fn queue_name(base: &str) -> String {
    format!("{base}-ec2")
}

fn rule_name(base: &str, kind: &RuleKind) -> String {
    format!("{base}-{}", kind.suffix)
}

/// A message read from a route's queue: its body (the EventBridge event as JSON) and the
/// handle that deletes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub body: String,
    pub receipt: String,
}

#[derive(Clone, Debug)]
pub struct Events {
    sqs: aws_sdk_sqs::Client,
    bridge: aws_sdk_eventbridge::Client,
    region: String,
}

impl Events {
    pub fn new(sqs: aws_sdk_sqs::Client, bridge: aws_sdk_eventbridge::Client, region: String) -> Self {
        Events { sqs, bridge, region }
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    fn err<E>(&self, what: &str, e: &E) -> AwsError
    where
        E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error,
    {
        AwsError::from_sdk(format!("{what} ({})", self.region), e)
    }

    /// Makes (or completes) the route named `base`: an encrypted queue, its two rules, each
    /// targeting it, and a queue policy that lets only those rules send to it. `about` goes
    /// into the rules' descriptions. Returns the queue's URL.
    pub async fn ensure_route(&self, base: &str, about: &str, tags: &[(String, String)]) -> Result<String> {
        let url = self.ensure_queue(base, tags).await?;
        let queue_arn = self.queue_arn(&url).await?;
        let mut rule_arns = Vec::new();
        for kind in &RULES {
            rule_arns.push(self.ensure_rule(base, kind, about, &queue_arn, tags).await?);
        }
        let policy = serde_json::json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Sid": "EventBridgeRulesOfThisRoute",
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": rule_arns}},
            }],
        });
        self.sqs
            .set_queue_attributes()
            .queue_url(&url)
            .attributes(QueueAttributeName::Policy, policy.to_string())
            .send()
            .await
            .map_err(|e| self.err(&format!("setting the policy of queue {}", queue_name(base)), &e))?;
        Ok(url)
    }

    async fn ensure_queue(&self, base: &str, tags: &[(String, String)]) -> Result<String> {
        let name = queue_name(base);
        let mut create = self
            .sqs
            .create_queue()
            .queue_name(&name)
            .attributes(QueueAttributeName::SqsManagedSseEnabled, "true")
            .attributes(QueueAttributeName::MessageRetentionPeriod, RETENTION_S.to_string());
        for (k, v) in tags {
            create = create.tags(k, v);
        }
        let out = create
            .send()
            .await
            .map_err(|e| self.err(&format!("creating queue {name}"), &e))?;
        out.queue_url
            .ok_or_else(|| AwsError::new(format!("creating queue {name}"), None, "no queue URL in the answer"))
    }

    async fn queue_arn(&self, url: &str) -> Result<String> {
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| self.err(&format!("reading the ARN of queue {url}"), &e))?;
        out.attributes
            .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
            .ok_or_else(|| AwsError::new(format!("reading the ARN of queue {url}"), None, "no QueueArn"))
    }

    async fn ensure_rule(
        &self,
        base: &str,
        kind: &RuleKind,
        about: &str,
        queue_arn: &str,
        tags: &[(String, String)],
    ) -> Result<String> {
        let name = rule_name(base, kind);
        let tags: Vec<aws_sdk_eventbridge::types::Tag> = tags
            .iter()
            .filter_map(|(k, v)| aws_sdk_eventbridge::types::Tag::builder().key(k).value(v).build().ok())
            .collect();
        let out = self
            .bridge
            .put_rule()
            .name(&name)
            .event_pattern((kind.pattern)().to_string())
            .state(RuleState::Enabled)
            .description(format!("{about}: EC2 {} to the head node", kind.what))
            .set_tags(Some(tags))
            .send()
            .await
            .map_err(|e| self.err(&format!("putting rule {name}"), &e))?;
        let target = Target::builder()
            .id(TARGET_ID)
            .arn(queue_arn)
            .build()
            .map_err(|e| AwsError::new(format!("targeting rule {name}"), None, e.to_string()))?;
        let put = self
            .bridge
            .put_targets()
            .rule(&name)
            .targets(target)
            .send()
            .await
            .map_err(|e| self.err(&format!("targeting rule {name} at its queue"), &e))?;
        if put.failed_entry_count > 0 {
            let why: Vec<String> = put
                .failed_entries
                .unwrap_or_default()
                .into_iter()
                .map(|f| {
                    format!(
                        "{}: {}",
                        f.error_code.unwrap_or_default(),
                        f.error_message.unwrap_or_default()
                    )
                })
                .collect();
            return Err(AwsError::new(
                format!("targeting rule {name} at its queue ({})", self.region),
                None,
                why.join("; "),
            ));
        }
        out.rule_arn
            .ok_or_else(|| AwsError::new(format!("putting rule {name}"), None, "no rule ARN in the answer"))
    }

    /// Removes the route named `base`: its rules' targets, the rules, then the queue. What is
    /// already gone is skipped.
    pub async fn delete_route(&self, base: &str) -> Result<()> {
        for kind in &RULES {
            let name = rule_name(base, kind);
            let removed = self
                .bridge
                .remove_targets()
                .rule(&name)
                .ids(TARGET_ID)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| self.err(&format!("removing the target of rule {name}"), &e));
            ok_if_gone(removed)?;
            let deleted = self
                .bridge
                .delete_rule()
                .name(&name)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| self.err(&format!("deleting rule {name}"), &e));
            ok_if_gone(deleted)?;
        }
        if let Some(url) = self.queue_url(&queue_name(base)).await? {
            let deleted = self
                .sqs
                .delete_queue()
                .queue_url(&url)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| self.err(&format!("deleting queue {url}"), &e));
            ok_if_gone(deleted)?;
        }
        Ok(())
    }

    /// The URL of the queue named `name`; None when there is none.
    pub async fn queue_url(&self, name: &str) -> Result<Option<String>> {
        match self.sqs.get_queue_url().queue_name(name).send().await {
            Ok(out) => Ok(out.queue_url),
            Err(e) => self
                .err(&format!("finding queue {name}"), &e)
                .or_ok_if(QUEUE_GONE, None),
        }
    }

    /// Up to ten messages, waiting up to `wait_s` seconds (at most 20) for the first.
    pub async fn receive(&self, url: &str, wait_s: i32) -> Result<Vec<Message>> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(wait_s.clamp(0, 20))
            .send()
            .await
            .map_err(|e| self.err(&format!("receiving from queue {url}"), &e))?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| {
                Some(Message {
                    body: m.body?,
                    receipt: m.receipt_handle?,
                })
            })
            .collect())
    }

    /// Deletes read messages (ten per call, as SQS takes them).
    pub async fn delete(&self, url: &str, messages: &[Message]) -> Result<()> {
        for chunk in messages.chunks(10) {
            let entries: Vec<DeleteMessageBatchRequestEntry> = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, m)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(&m.receipt)
                        .build()
                        .ok()
                })
                .collect();
            self.sqs
                .delete_message_batch()
                .queue_url(url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| self.err(&format!("deleting messages from queue {url}"), &e))?;
        }
        Ok(())
    }
}

/// SQS's codes for a queue that does not exist (JSON and query protocols).
const QUEUE_GONE: &[&str] = &["AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"];
/// What a removal may find already gone: a rule (EventBridge's code) or a queue.
const GONE: &[&str] = &[
    "ResourceNotFoundException",
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
];

fn ok_if_gone(result: Result<()>) -> Result<()> {
    result.or_else(|e| e.or_ok_if(GONE, ()))
}

/// What a route carries, read from one message's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ec2Event {
    /// EC2 takes the spot instance back in two minutes (`action`: terminate, stop or hibernate).
    SpotInterruption {
        instance_id: String,
        action: String,
        time: String,
    },
    /// The instance is leaving service (`state`: one of [`LEAVING_STATES`]).
    StateChange {
        instance_id: String,
        state: String,
        time: String,
    },
}

impl Ec2Event {
    /// The event in an EventBridge message body; None for anything else (another source, a
    /// malformed body, a state the route does not carry).
    pub fn parse(body: &str) -> Option<Ec2Event> {
        let v: serde_json::Value = serde_json::from_str(body).ok()?;
        if v["source"].as_str()? != "aws.ec2" {
            return None;
        }
        let detail = &v["detail"];
        let instance_id = detail["instance-id"].as_str()?.to_string();
        let time = v["time"].as_str().unwrap_or_default().to_string();
        match v["detail-type"].as_str()? {
            SPOT_INTERRUPTION => Some(Ec2Event::SpotInterruption {
                instance_id,
                action: detail["instance-action"].as_str().unwrap_or("terminate").to_string(),
                time,
            }),
            STATE_CHANGE => {
                let state = detail["state"].as_str()?;
                LEAVING_STATES.contains(&state).then(|| Ec2Event::StateChange {
                    instance_id,
                    state: state.to_string(),
                    time,
                })
            }
            _ => None,
        }
    }

    pub fn instance_id(&self) -> &str {
        match self {
            Ec2Event::SpotInterruption { instance_id, .. } | Ec2Event::StateChange { instance_id, .. } => instance_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_from_eventbridge_bodies() {
        let spot = r#"{"version":"0","id":"1","detail-type":"EC2 Spot Instance Interruption Warning",
            "source":"aws.ec2","account":"123456789012","time":"2026-12-06T10:00:00Z","region":"us-east-1",
            "resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-1"],
            "detail":{"instance-id":"i-1","instance-action":"terminate"}}"#;
        assert_eq!(
            Ec2Event::parse(spot),
            Some(Ec2Event::SpotInterruption {
                instance_id: "i-1".into(),
                action: "terminate".into(),
                time: "2026-12-06T10:00:00Z".into(),
            })
        );
        let ended = r#"{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2",
            "time":"t","detail":{"instance-id":"i-2","state":"shutting-down"}}"#;
        let event = Ec2Event::parse(ended).expect("a state change");
        assert_eq!(event.instance_id(), "i-2");
        assert!(matches!(event, Ec2Event::StateChange { ref state, .. } if state == "shutting-down"));
        // A state the route does not carry, another source, and no JSON at all are not events.
        assert_eq!(Ec2Event::parse(&ended.replace("shutting-down", "running")), None);
        assert_eq!(Ec2Event::parse(&ended.replace("aws.ec2", "my.app")), None);
        assert_eq!(Ec2Event::parse("not json"), None);
    }

    #[test]
    fn the_state_rule_lets_through_only_the_states_instances_leave_in() {
        let pattern = (RULES[1].pattern)();
        assert_eq!(pattern["detail"]["state"], serde_json::json!(LEAVING_STATES));
        assert_eq!(pattern["detail-type"][0], STATE_CHANGE);
        let spot = (RULES[0].pattern)();
        assert_eq!(spot["detail-type"][0], SPOT_INTERRUPTION);
    }
}
