/*
 * round.h — the scheduling round's SQL face (run_round; why_pending is why.c's).
 */
#ifndef GANGSCHED_ROUND_H
#define GANGSCHED_ROUND_H

/* Take the round's transaction-level advisory lock; false if another round has it. */
extern bool gs_try_round_lock(void);

#endif							/* GANGSCHED_ROUND_H */
