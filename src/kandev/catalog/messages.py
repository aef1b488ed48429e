"""Message kinds of a session's conversation, the statuses of the ones a human answers,
and the metadata keys they carry (reference clarification-baseline §1.2 to §1.4, §1.7)."""

from __future__ import annotations

CLARIFICATION_TYPE = "clarification_request"
PERMISSION_TYPE = "permission_request"
TOOL_CALL_TYPE = "tool_call"
# A tool call still open (ACP `pending` / `in_progress`, or no status yet) when its agent was
# gone — the server restarted under it — is closed as INTERRUPTED: nobody will finish it.
TOOL_CALL_OPEN_STATUSES = ("", "pending", "in_progress")
INTERRUPTED = "interrupted"

# Row statuses (§1.3). RESPONDING only exists inside the claim transaction.
PENDING = "pending"
ANSWERED = "answered"
REJECTED = "rejected"
EXPIRED = "expired"
CANCELLED = "cancelled"
RESPONDING = "responding"
STATUSES = (PENDING, ANSWERED, REJECTED, EXPIRED, CANCELLED)
CLAIM_STATUSES = (ANSWERED, REJECTED)

# Message metadata keys (§1.2).
PENDING_ID_KEY = "pending_id"
QUESTION_ID_KEY = "question_id"
QUESTION_KEY = "question"
QUESTION_INDEX_KEY = "question_index"
QUESTION_TOTAL_KEY = "question_total"
CONTEXT_KEY = "context"
STATUS_KEY = "status"
RESPONSE_KEY = "response"
AGENT_DISCONNECTED_KEY = "agent_disconnected"
DELIVERY_PENDING_KEY = "response_delivery_pending"
# Set when the delivery intent is cleared: how the outcome reached the agent (or why not).
DELIVERED_VIA_KEY = "response_delivered_via"
VIA_TOOL_CALL = "tool_call"  # the waiting ask call's result was written to the agent
VIA_RESUME_TURN = "resume_turn"  # a resume prompt was written to the agent's stdin
VIA_RECORDED = "recorded"  # nobody to resume (detached rejection, agent Kandev does not run)
VIA_RETIRED = "retired"  # startup recovery: the session ended before it could be delivered
DELIVERY_VIAS = (VIA_TOOL_CALL, VIA_RESUME_TURN, VIA_RECORDED, VIA_RETIRED)
REJECT_REASON_KEY = "reject_reason"  # a rejection's reason, for a resume after a restart
PARENT_QUESTION_KEY = "parent_question"

# Turn metadata keys of a dispatch reservation (§1.4).
DISPATCH_PENDING_KEY = "prompt_dispatch_pending"
DISPATCH_ATTEMPTED_KEY = "prompt_dispatch_attempted"
DISPATCH_PENDING_ID_KEY = "prompt_dispatch_clarification_pending_id"
DISPATCH_TURN_ID_KEY = "prompt_dispatch_clarification_turn_id"
DISPATCH_MESSAGE_IDS_KEY = "prompt_dispatch_clarification_message_ids"
START_EVENT_PENDING_KEY = "prompt_dispatch_start_event_pending"
DISPATCH_KEYS = (
    DISPATCH_PENDING_KEY,
    DISPATCH_ATTEMPTED_KEY,
    DISPATCH_PENDING_ID_KEY,
    DISPATCH_TURN_ID_KEY,
    DISPATCH_MESSAGE_IDS_KEY,
)

# Pending-action projection values (§1.7): what a session waits on a human for.
ACTION_CLARIFICATION = "clarification"
ACTION_PERMISSION = "permission"

# Permission requests (`permission_request` rows, CONTRACT §11): pending → allowed | rejected
# (one claim) or expired (turn end, session end, restart).
ALLOWED = "allowed"
PERMISSION_STATUSES = (PENDING, ALLOWED, REJECTED, EXPIRED)
PERMISSION_DECIDED = (ALLOWED, REJECTED)
TOOL_CALL_KEY = "tool_call"
OPTIONS_KEY = "options"
DECISION_KEY = "decision"  # {option_id, name, kind, via, decided_by} of the winner
