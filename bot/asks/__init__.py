"""What waits for a person: approvals, servers' questions, sign-in connections and parked turns."""
