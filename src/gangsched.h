/*
 * gangsched.h — module entry points shared across src/.
 *
 * Each concern has its own file and header; this one only declares the
 * init functions that _PG_init calls.
 */
#ifndef GANGSCHED_H
#define GANGSCHED_H

extern void gs_guc_init(void);
extern void gs_wake_init(void);

#endif							/* GANGSCHED_H */
