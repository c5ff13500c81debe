/*
 * spi.h — the round's and the loader's statements through SPI, with kept
 * plans (spi.c).
 */
#ifndef GANGSCHED_SPI_H
#define GANGSCHED_SPI_H

#include "executor/spi.h"
#include "tcop/dest.h"

/*
 * Execute sql (nargs parameters of the given types, none null) inside the
 * caller's SPI connection, not read-only; rows to dest when it is not NULL,
 * else to SPI_tuptable. cache: keep the statement's plan for the backend's
 * life (only for texts that do not change between rounds). An outcome other
 * than expect is an error naming `who` and the statement. The caller's
 * memory context stays current. Returns SPI's code.
 */
extern int	gs_spi_exec(const char *who, const char *sql, int nargs, Oid *types, Datum *values,
						DestReceiver *dest, bool cache, int expect);

#endif							/* GANGSCHED_SPI_H */
