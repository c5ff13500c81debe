/*
 * guard.h — rounds that a tenant's open transaction cannot stall.
 */
#ifndef GANGSCHED_GUARD_H
#define GANGSCHED_GUARD_H

/* lock_timeout = gangsched.round_lock_timeout for the rest of this GUC nest level. */
extern void gs_round_lock_timeout(void);

/*
 * After a round gave up waiting for a lock: end the sessions of tenant
 * roles whose writing transaction has been open longer than
 * gangsched.round_lock_timeout (only they can hold the row locks a round
 * waits for). Runs its own transaction; returns how many were ended.
 */
extern int	gs_end_blocking_tenants(void);

#endif							/* GANGSCHED_GUARD_H */
