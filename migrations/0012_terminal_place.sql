-- The terminal's place was written `terminal:cli`, a spelling `nerve tools --place` refuses; it is
-- `terminal` everywhere now, so approvals remembered there are listed and revoked as `terminal`.
UPDATE remembered_approvals SET place = 'terminal' WHERE place = 'terminal:cli';
UPDATE parked_turns SET place = 'terminal' WHERE place = 'terminal:cli';
UPDATE audit SET place = 'terminal' WHERE place = 'terminal:cli';
