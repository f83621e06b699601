/* leading */ SELECT 1 -- line
, 2 # hash
/*!50001 , 3 */ FROM t