#pragma once
// The coordinator's code names the wire types and rules it shares with nodes (src/protocol)
// as its own, unqualified: they moved below both sides so that a node needs nothing of the
// coordinator's (its stores, its SQL), and the coordinator's code did not have to change with them.
#include "protocol/audit.h"
#include "protocol/credits.h"
#include "protocol/file_hash.h"
#include "protocol/keys.h"
#include "protocol/ledger_entry.h"
#include "protocol/ledger_proof.h"
#include "protocol/messages.h"
#include "protocol/node_identity.h"
#include "protocol/node_info.h"
#include "protocol/request_signing.h"
#include "protocol/secure_random.h"

namespace orchard::network {

// audit.h
using protocol::audit_report_from_json;
using protocol::audit_request_from_json;
using protocol::AuditOutcome;
using protocol::AuditReport;
using protocol::AuditRequest;
using protocol::AuditRules;
using protocol::check_canary;
using protocol::judge;
using protocol::kAuditApi;
using protocol::Verdict;

// credits.h
using protocol::base_rate;
using protocol::HardwareClass;
using protocol::hardware_percent;
using protocol::job_credits;
using protocol::measured_hardware_class;
using protocol::JobUsage;
using protocol::kDedicatedPercent;
using protocol::kMicroPerCredit;
using protocol::parse_hardware_class;
using protocol::parse_size_class;
using protocol::Rate;
using protocol::size_class;
using protocol::SizeClass;
// keys.h, ledger_entry.h, ledger_proof.h
using protocol::check_owner_proof;
using protocol::entry_from_json;
using protocol::entry_hash;
using protocol::Entry;
using protocol::from_hex;
using protocol::generate_ed25519_key;
using protocol::Head;
using protocol::head_message;
using protocol::KeyDeleter;
using protocol::KeyPtr;
using protocol::kLedgerChainPath;
using protocol::kLedgerEntriesPath;
using protocol::kLedgerHeadPath;
using protocol::kLedgerKeyPath;
using protocol::kZeroHash;
using protocol::OwnerCheck;
using protocol::OwnerProof;
using protocol::proof_start;
using protocol::public_key_from_hex;
using protocol::public_key_hex;
using protocol::sha256_hex;
using protocol::signed_head_from_json;
using protocol::SignedHead;
using protocol::to_hex;
// messages.h
using protocol::chunk_from_json;
using protocol::job_path;
using protocol::kChatApi;
using protocol::kCompletionsApi;
using protocol::kHeartbeatPath;
using protocol::kMaxPollWaitS;
using protocol::kNodeStatusPath;
using protocol::kRegisterPath;
using protocol::kWorkPath;
using protocol::OutputChunk;
using protocol::register_reply_from_json;
using protocol::RegisterReply;
using protocol::Work;
using protocol::work_from_json;
// node_identity.h, node_info.h
using protocol::CabledGroup;
using protocol::heartbeat_from_json;
using protocol::HeartbeatState;
using protocol::Lending;
using protocol::MachineInfo;
using protocol::ModelInfo;
using protocol::model_info_from_json;
using protocol::node_id_for_public_key;
using protocol::node_info_from_json;
using protocol::NodeIdentity;
using protocol::NodeInfo;
using protocol::NodeStatus;
using protocol::parse_node_info;
using protocol::verify_node_signature;
using protocol::is_sha256_hex;
using protocol::file_sha256;
// request_signing.h, secure_random.h
using protocol::AuthResult;
using protocol::AuthStatus;
using protocol::canonical_request;
using protocol::Headers;
using protocol::KeyLookup;
using protocol::kDefaultMaxSkewMs;
using protocol::kKeyHeader;
using protocol::kNodeHeader;
using protocol::kNonceHeader;
using protocol::kSignatureHeader;
using protocol::kTimestampHeader;
using protocol::NonceStore;
using protocol::random_hex;
using protocol::sign_request;
using protocol::verify_request;
using protocol::VerifyOptions;
// Overloaded across the files above.
using protocol::to_json;
using protocol::to_string;

}  // namespace orchard::network
