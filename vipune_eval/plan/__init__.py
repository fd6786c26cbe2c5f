"""Parse time and hooks only: no rule's command reaches these modules."""
